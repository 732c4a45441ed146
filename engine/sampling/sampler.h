// Host-side token sampling from fp32 logits: penalties, temperature, top-k,
// top-p, min-p, seeded RNG per sequence, and top-n logprobs.
//
// Thread-safety: a SequenceSampler belongs to one sequence; not thread-safe.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/sampling/sampling_params.h"

namespace gemma {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// Logprobs are the log-softmax over the whole vocabulary of the logits after
// penalties and temperature (greedy: after penalties), before top-k / top-p /
// min-p truncation, so they are finite and comparable across requests. They are
// computed only when num_logprobs >= 0; otherwise logprob is 0 and top empty.
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
  // REQUIRES: logits is non-empty and holds at least one finite value.
  SampleResult Sample(std::span<float> logits);
  // Records an output token chosen elsewhere (e.g. on the device).
  void Accept(int32_t token_id);

 private:
  void ApplyPenalties(std::span<float> logits) const;
  // Fills candidates_ with the tokens top-k / top-p / min-p leave; sorted
  // best-first whenever a truncation needed the order.
  void SelectCandidates(std::span<const float> logits);
  void TopK(std::span<const float> logits, size_t k);
  void TopP(std::span<const float> logits);
  void MinP(std::span<const float> logits);
  int32_t Draw(std::span<const float> logits);
  void FillLogprobs(std::span<const float> logits, SampleResult& result);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int> output_counts_;
  std::unordered_set<int32_t> seen_;  // prompt + output, for repetition penalty
  // Scratch buffers reused across steps to avoid vocab-sized allocations.
  std::vector<int32_t> candidates_;
  std::vector<float> weights_;
};

}  // namespace gemma
