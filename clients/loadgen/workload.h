// The requests a run sends and when: prompts of random token ids (or one
// fixed text), their lengths, and the Poisson arrival schedule.
// Pure functions of their arguments (seeded); thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "clients/loadgen/flags.h"

namespace gemma::loadgen {

// Gemma's special tokens (pad, eos, bos, unk, mask, ...) sit at the low end of
// the vocabulary; random prompts draw ids from [kMinRandomTokenId, vocab_size).
inline constexpr int32_t kMinRandomTokenId = 10;

// What the benchmark needs to know about the served model.
struct ModelLimits {
  int vocab_size = 0;
  int context_length = 0;         // prompt + output tokens per sequence
  std::optional<int32_t> bos_id;  // first id of every random prompt when known
};

struct RequestSpec {
  std::vector<int32_t> prompt_ids;  // empty when prompt_text is used
  std::string prompt_text;
  int max_tokens = 0;
};

// `num` lengths uniform in [floor(len * (1 - ratio)), floor(len * (1 + ratio))],
// at least 1 each.
std::vector<int> SampleLengths(int len, double ratio, int num, std::mt19937_64& rng);

// "" when the longest possible request fits the model, else why not.
std::string CheckWorkloadFits(const LoadgenOptions& options, const ModelLimits& limits);

// `num` requests from `options`' workload flags, seeded by `seed`.
// REQUIRES: CheckWorkloadFits(options, limits) is "".
std::vector<RequestSpec> BuildWorkload(const LoadgenOptions& options, const ModelLimits& limits,
                                       int num, uint64_t seed);

// Send offsets in seconds from the start, non-decreasing: 0 for the first
// request, then exponential gaps of mean 1 / rate (a Poisson process). An
// infinite rate sends everything at 0.
std::vector<double> PoissonArrivals(double rate, int num, uint64_t seed);

}  // namespace gemma::loadgen
