// Host-side token sampling from fp32 logits: penalties, temperature, top-k,
// top-p, min-p, seeded RNG per sequence, and top-n logprobs.
//
// Thread-safety: a SequenceSampler belongs to one sequence; not thread-safe.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sampling/sampling_params.h"

namespace gemma {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token_id = 0;
  float logprob = 0.0f;                 // of the chosen token (after penalties/temperature)
  std::vector<TokenLogprob> top;        // num_logprobs alternatives, best first
};

class SequenceSampler {
 public:
  // `prompt` feeds the repetition penalty. `fallback_seed` is used when
  // params.seed is unset (the engine draws it from its own RNG).
  SequenceSampler(const SamplingParams& params, std::span<const int32_t> prompt,
                  uint64_t fallback_seed);

  // Samples the next token from `logits` (modified in place: penalties,
  // temperature) and records it as generated output.
  SampleResult Sample(std::span<float> logits);
  // Records an output token chosen elsewhere (e.g. on the device).
  void Accept(int32_t token_id);

 private:
  void ApplyPenalties(std::span<float> logits) const;
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int> output_counts_;
  std::unordered_map<int32_t, bool> seen_;  // prompt + output, for repetition penalty
};

}  // namespace gemma
