// Operator-set token limits (--max-prompt-tokens, --max-total-tokens),
// applied to a request after request_builder validated it against the model.
//
// Thread-safety: a free function over its arguments.
#pragma once

#include "absl/status/status.h"
#include "engine/core/request.h"
#include "gemma/v1/gemma.pb.h"

namespace gemma::server::ops {

struct RequestLimits {
  int max_prompt_tokens = 0;  // 0 = only the context bounds it
  int max_total_tokens = 0;   // prompt + max_tokens; 0 = only the context
};

// INVALID_ARGUMENT naming the flag when `request` breaks a limit. A request
// that left stopping.max_tokens unset gets it lowered to what
// --max-total-tokens leaves (as the context bound does); an explicit one
// that does not fit is an error.
absl::Status ApplyRequestLimits(const v1::GenerateRequest& proto, const RequestLimits& limits,
                                GenerationRequest* request);

}  // namespace gemma::server::ops
