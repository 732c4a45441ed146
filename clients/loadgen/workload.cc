#include "clients/loadgen/workload.h"

#include <algorithm>
#include <cmath>

namespace gemma::loadgen {
namespace {

int MaxLength(int len, double ratio) {
  return static_cast<int>(std::floor(len * (1.0 + ratio)));
}

std::vector<int32_t> RandomPrompt(int len, const ModelLimits& limits, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> id(kMinRandomTokenId, limits.vocab_size - 1);
  std::vector<int32_t> ids;
  ids.reserve(len);
  if (limits.bos_id) ids.push_back(*limits.bos_id);
  while (static_cast<int>(ids.size()) < len) ids.push_back(id(rng));
  return ids;
}

}  // namespace

std::vector<int> SampleLengths(int len, double ratio, int num, std::mt19937_64& rng) {
  const int low = std::max(1, static_cast<int>(std::floor(len * (1.0 - ratio))));
  const int high = std::max(low, MaxLength(len, ratio));
  std::uniform_int_distribution<int> length(low, high);
  std::vector<int> lengths(num);
  for (int& l : lengths) l = length(rng);
  return lengths;
}

std::string CheckWorkloadFits(const LoadgenOptions& options, const ModelLimits& limits) {
  const int max_output = MaxLength(options.output_len, options.random_range_ratio);
  if (options.prompt) {
    if (max_output >= limits.context_length) {
      return "--output-len up to " + std::to_string(max_output) + " does not fit the context (" +
             std::to_string(limits.context_length) + " tokens)";
    }
    return "";
  }
  if (limits.vocab_size <= kMinRandomTokenId) {
    return "the model's vocabulary (" + std::to_string(limits.vocab_size) +
           ") is too small for random prompts";
  }
  const int max_input = MaxLength(options.input_len, options.random_range_ratio);
  if (max_input + max_output > limits.context_length) {
    return "input up to " + std::to_string(max_input) + " + output up to " +
           std::to_string(max_output) + " tokens exceeds the context (" +
           std::to_string(limits.context_length) + " tokens)";
  }
  return "";
}

std::vector<RequestSpec> BuildWorkload(const LoadgenOptions& options, const ModelLimits& limits,
                                       int num, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<int> input_lens =
      SampleLengths(options.input_len, options.random_range_ratio, num, rng);
  const std::vector<int> output_lens =
      SampleLengths(options.output_len, options.random_range_ratio, num, rng);
  std::vector<RequestSpec> specs(num);
  for (int i = 0; i < num; ++i) {
    specs[i].max_tokens = output_lens[i];
    if (options.prompt) {
      specs[i].prompt_text = *options.prompt;
    } else {
      specs[i].prompt_ids = RandomPrompt(input_lens[i], limits, rng);
    }
  }
  return specs;
}

std::vector<double> PoissonArrivals(double rate, int num, uint64_t seed) {
  std::vector<double> offsets(std::max(num, 0), 0.0);
  if (std::isinf(rate)) return offsets;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  for (int i = 1; i < num; ++i) offsets[i] = offsets[i - 1] + gap(rng);
  return offsets;
}

}  // namespace gemma::loadgen
