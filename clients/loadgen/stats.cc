#include "clients/loadgen/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gemma::loadgen {

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return values[below] + (values[above] - values[below]) * fraction;
}

Distribution Summarize(const std::vector<double>& values) {
  Distribution d;
  d.count = values.size();
  if (values.empty()) return d;
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.p50 = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p99 = Percentile(values, 99);
  return d;
}

BenchmarkMetrics ComputeMetrics(const std::vector<RequestResult>& results, double duration_s) {
  BenchmarkMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestResult& r : results) {
    if (!r.ok) {
      ++m.num_failed;
      ++m.failures_by_code[r.error_code];
      continue;
    }
    ++m.num_completed;
    m.total_input_tokens += r.prompt_tokens;
    m.total_output_tokens += r.output_tokens;
    e2e.push_back(r.e2e_ms);
    if (r.output_tokens > 0) ttft.push_back(r.ttft_ms);
    if (r.output_tokens > 1) tpot.push_back((r.e2e_ms - r.ttft_ms) / (r.output_tokens - 1));
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
  }
  if (duration_s > 0) {
    m.request_throughput = m.num_completed / duration_s;
    m.output_token_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / duration_s;
  }
  m.ttft_ms = Summarize(ttft);
  m.tpot_ms = Summarize(tpot);
  m.itl_ms = Summarize(itl);
  m.e2e_ms = Summarize(e2e);
  return m;
}

}  // namespace gemma::loadgen
