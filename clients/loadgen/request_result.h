// What one Generate stream measured, as the runner hands it to the stats.
// Plain data with no gRPC types so that the stats are testable on their own.
#pragma once

#include <string>
#include <vector>

namespace gemma::loadgen {

struct RequestResult {
  bool ok = false;
  std::string error_code;     // gRPC status code name ("OK" when ok)
  std::string error_message;
  int prompt_tokens = 0;      // usage.prompt_tokens, else the ids sent
  int output_tokens = 0;      // token ids received
  double ttft_ms = 0;         // send -> first token-bearing message; 0 when none came
  double e2e_ms = 0;          // send -> stream closed
  // One entry per token after the first message: a message carrying k tokens
  // k ms after the previous token-bearing message adds k entries of gap / k,
  // so that sum(itl_ms) / count == (last token - first token) / (tokens - 1).
  std::vector<double> itl_ms;
};

}  // namespace gemma::loadgen
