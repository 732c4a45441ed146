// Aggregates per-request results into the benchmark's metrics.
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "clients/loadgen/request_result.h"

namespace gemma::loadgen {

// The p-th percentile (0..100) of `values` by linear interpolation between
// the closest ranks (numpy's default, which vllm bench serve reports too).
// Returns 0 for an empty input. `values` need not be sorted.
double Percentile(std::vector<double> values, double p);

struct Distribution {
  size_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;  // 0 when count == 0
};
Distribution Summarize(const std::vector<double>& values);

struct BenchmarkMetrics {
  double duration_s = 0;
  int num_completed = 0;
  int num_failed = 0;
  std::map<std::string, int> failures_by_code;  // gRPC code name -> count
  int64_t total_input_tokens = 0;               // of completed requests
  int64_t total_output_tokens = 0;
  double request_throughput = 0;       // completed requests / s
  double output_token_throughput = 0;  // output tokens / s
  double total_token_throughput = 0;   // (input + output tokens) / s
  Distribution ttft_ms, tpot_ms, itl_ms, e2e_ms;
};

// Only successful requests enter the token counts and the distributions;
// TPOT = (e2e - ttft) / (output_tokens - 1) for requests with >= 2 tokens.
BenchmarkMetrics ComputeMetrics(const std::vector<RequestResult>& results, double duration_s);

}  // namespace gemma::loadgen
