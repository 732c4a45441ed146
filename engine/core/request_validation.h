// Admission: every check of what a GenerationRequest means (vocabulary,
// token budget, stops, sampling ranges), made once at Engine::Submit. Errors
// are INVALID_ARGUMENT naming the field by its gemma.v1 proto path (which the
// GenerationRequest mirrors: sampling.top_p, stopping.max_tokens, tokens.ids,
// logprobs) and the value, so a front can pass them on unchanged.
#pragma once

#include "absl/status/status.h"
#include "engine/core/request.h"
#include "engine/core/token_budget.h"

namespace gemma {

inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxStopStringBytes = 256;
inline constexpr int kMaxLogprobs = 20;

struct AdmissionLimits {
  int vocab_size = 0;  // ids the model embeds
  TokenLimits tokens;
};

// Checks `request` and resolves its budget: on OK, stopping.max_tokens holds
// the effective value (ResolveMaxTokens). `pool` may be null (no KV bound).
absl::Status ValidateRequest(const AdmissionLimits& limits, const KvPoolCheck& pool,
                             GenerationRequest* request);

}  // namespace gemma
