#include "engine/sampling/sampling_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace gemma {
namespace {

absl::Status OutOfRange(const char* field, const char* range, float value) {
  return absl::InvalidArgumentError(absl::StrCat(field, " must be ", range, ", got ", value));
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& params) {
  // Every comparison is written so that NaN fails it.
  if (!(std::isfinite(params.temperature) && params.temperature >= 0.0f)) {
    return OutOfRange("temperature", "finite and >= 0", params.temperature);
  }
  if (params.top_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0, got ", params.top_k));
  }
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {
    return OutOfRange("top_p", "in (0, 1]", params.top_p);
  }
  if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) {
    return OutOfRange("min_p", "in [0, 1]", params.min_p);
  }
  if (!(std::isfinite(params.repetition_penalty) && params.repetition_penalty > 0.0f)) {
    return OutOfRange("repetition_penalty", "finite and > 0", params.repetition_penalty);
  }
  if (!(params.presence_penalty >= -2.0f && params.presence_penalty <= 2.0f)) {
    return OutOfRange("presence_penalty", "in [-2, 2]", params.presence_penalty);
  }
  if (!(params.frequency_penalty >= -2.0f && params.frequency_penalty <= 2.0f)) {
    return OutOfRange("frequency_penalty", "in [-2, 2]", params.frequency_penalty);
  }
  if (params.num_logprobs < -1 || params.num_logprobs > 20) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_logprobs must be in [-1, 20], got ", params.num_logprobs));
  }
  return absl::OkStatus();
}

}  // namespace gemma
