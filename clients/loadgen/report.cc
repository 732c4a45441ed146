#include "clients/loadgen/report.h"

#include <cmath>
#include <iomanip>
#include <ostream>

namespace gemma::loadgen {
namespace {

constexpr int kLabelWidth = 34;

template <typename T>
void PrintRow(std::ostream& out, const char* label, T value) {
  out << std::left << std::setw(kLabelWidth) << label << std::right << std::setw(14) << value
      << "\n";
}

void PrintDistribution(std::ostream& out, const char* name, const Distribution& d) {
  out << std::left << std::setw(10) << name << std::right;
  for (double v : {d.mean, d.p50, d.p90, d.p99}) out << std::setw(12) << v;
  out << std::setw(10) << d.count << "\n";
}

nlohmann::json DistributionToJson(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50}, {"p90", d.p90}, {"p99", d.p99}};
}

nlohmann::json ConfigToJson(const LoadgenOptions& o) {
  nlohmann::json config = {
      {"addr", o.addr},
      {"num_channels", o.num_channels},
      {"num_requests", o.num_requests},
      {"warmup_requests", o.warmup_requests},
      {"input_len", o.input_len},
      {"output_len", o.output_len},
      {"random_range_ratio", o.random_range_ratio},
      {"ignore_eos", o.ignore_eos},
      {"seed", o.seed},
      {"temperature", o.temperature},
      {"timeout_s", o.timeout_s},
      {"prompt", o.prompt ? nlohmann::json(*o.prompt) : nlohmann::json(nullptr)},
  };
  config["concurrency"] = o.concurrency ? nlohmann::json(*o.concurrency) : nlohmann::json(nullptr);
  // JSON has no infinity: an unbounded rate is written as the string "inf".
  config["request_rate"] = o.concurrency ? nlohmann::json(nullptr)
                           : std::isinf(o.request_rate) ? nlohmann::json("inf")
                                                        : nlohmann::json(o.request_rate);
  config["max_concurrency"] =
      o.max_concurrency ? nlohmann::json(*o.max_concurrency) : nlohmann::json(nullptr);
  return config;
}

}  // namespace

void PrintTable(const BenchmarkMetrics& m, std::ostream& out) {
  const std::ios::fmtflags saved = out.flags();
  out << std::fixed << std::setprecision(2);
  out << "=============== gemma-loadgen result ===============\n";
  PrintRow(out, "Successful requests:", m.num_completed);
  PrintRow(out, "Failed requests:", m.num_failed);
  for (const auto& [code, count] : m.failures_by_code) {
    PrintRow(out, ("  " + code + ":").c_str(), count);
  }
  PrintRow(out, "Benchmark duration (s):", m.duration_s);
  PrintRow(out, "Total input tokens:", m.total_input_tokens);
  PrintRow(out, "Total generated tokens:", m.total_output_tokens);
  PrintRow(out, "Request throughput (req/s):", m.request_throughput);
  PrintRow(out, "Output token throughput (tok/s):", m.output_token_throughput);
  PrintRow(out, "Total token throughput (tok/s):", m.total_token_throughput);
  out << "---------------------------------------------------\n";
  out << std::left << std::setw(10) << "(ms)" << std::right;
  for (const char* column : {"mean", "p50", "p90", "p99"}) out << std::setw(12) << column;
  out << std::setw(10) << "samples" << "\n";
  PrintDistribution(out, "TTFT", m.ttft_ms);
  PrintDistribution(out, "TPOT", m.tpot_ms);
  PrintDistribution(out, "ITL", m.itl_ms);
  PrintDistribution(out, "E2E", m.e2e_ms);
  out << "===================================================\n";
  out.flags(saved);
}

nlohmann::json MetricsToJson(const BenchmarkMetrics& m, const LoadgenOptions& options) {
  return {
      {"config", ConfigToJson(options)},
      {"duration_s", m.duration_s},
      {"completed", m.num_completed},
      {"failed", m.num_failed},
      {"failures_by_code", m.failures_by_code},
      {"total_input_tokens", m.total_input_tokens},
      {"total_output_tokens", m.total_output_tokens},
      {"request_throughput", m.request_throughput},
      {"output_token_throughput", m.output_token_throughput},
      {"total_token_throughput", m.total_token_throughput},
      {"ttft_ms", DistributionToJson(m.ttft_ms)},
      {"tpot_ms", DistributionToJson(m.tpot_ms)},
      {"itl_ms", DistributionToJson(m.itl_ms)},
      {"e2e_ms", DistributionToJson(m.e2e_ms)},
  };
}

}  // namespace gemma::loadgen
