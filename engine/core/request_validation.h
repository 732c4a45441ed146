// Checks a GenerationRequest against the model and engine limits. Every error
// is INVALID_ARGUMENT naming the field and the value.
#pragma once

#include "absl/status/status.h"
#include "engine/core/request.h"

namespace gemma {

inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxStopStringBytes = 256;
inline constexpr int kMaxLogprobs = 20;

absl::Status ValidateRequest(const GenerationRequest& request, int vocab_size, int max_context);

}  // namespace gemma
