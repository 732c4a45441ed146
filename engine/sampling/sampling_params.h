// Per-request sampling parameters. Validated once at the boundary
// (ValidateSamplingParams); the sampler assumes valid values.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "kernels/sampling/sample_rng.h"

namespace gemma {

struct SamplingParams {
  float temperature = 1.0f;       // below 1e-5 (0 included) = greedy
  int top_k = 0;                  // 0 = off
  float top_p = 1.0f;             // (0, 1]
  float min_p = 0.0f;             // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1 = off (applies to prompt + output)
  float presence_penalty = 0.0f;    // output tokens only
  float frequency_penalty = 0.0f;   // output tokens only
  std::optional<uint64_t> seed;   // same seed and request -> same tokens
  int num_logprobs = -1;          // -1 = none; 0 = sampled token only; up to 20

  // The argmax, whatever the device or host samples with: one rule for
  // every path (kernels::IsGreedyTemperature).
  bool greedy() const { return kernels::IsGreedyTemperature(temperature); }
};

// INVALID_ARGUMENT naming the field and value, e.g.
// "top_p must be in (0, 1], got 1.5".
absl::Status ValidateSamplingParams(const SamplingParams& params);

}  // namespace gemma
