// gemma-loadgen's command line (CLI11), validated once; immutable after.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gemma::loadgen {

enum class Protocol { kGrpc, kOpenAi };

struct LoadgenOptions {
  // kGrpc: gemma.v1 Generate streams at `addr`; kOpenAi: streaming
  // /v1/completions at `http_addr` (the model's limits still come from
  // GetModelInfo at `addr`: the OpenAI API does not name the vocabulary size).
  Protocol protocol = Protocol::kGrpc;
  std::string addr = "127.0.0.1:50051";
  std::string http_addr = "127.0.0.1:8000";
  std::string api_key;                // sent as "authorization: Bearer <key>" (both protocols)
  int num_channels = 4;               // separate HTTP/2 connections, requests round-robin
  // Arrival process: a fixed number of streams in flight (closed loop), or
  // Poisson arrivals at `request_rate` (open loop, inf = all at once) with an
  // optional cap on streams in flight. Exactly one of the two is used.
  std::optional<int> concurrency;
  double request_rate = 0;            // requests / s when concurrency is unset; inf allowed
  std::optional<int> max_concurrency;
  int num_requests = 100;
  int warmup_requests = 1;            // run before the measured ones, not counted
  // Workload: random token-id prompts of input_len, or one fixed text prompt.
  int input_len = 128;                // tokens per prompt (including BOS)
  int output_len = 64;                // max_tokens per request
  double random_range_ratio = 0;      // lengths uniform in [len * (1 - r), len * (1 + r)]
  std::optional<std::string> prompt;  // text prompt instead of random ids
  bool ignore_eos = false;
  uint64_t seed = 0;
  float temperature = 0;              // 0 = greedy
  double timeout_s = 600;             // deadline per request
  std::string json_path;              // also write the JSON result here
};

// Parsed options, or the exit code to return at once (0 for --help, 2 for bad
// flags, after printing why).
struct ParsedOptions {
  std::optional<LoadgenOptions> options;
  int exit_code = 0;
};
ParsedOptions ParseLoadgenFlags(int argc, char** argv);

// The limit on streams in flight: `concurrency`, else `max_concurrency`,
// else 0 (unlimited).
int MaxInFlight(const LoadgenOptions& options);

}  // namespace gemma::loadgen
