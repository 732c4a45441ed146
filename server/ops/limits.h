// Operator-set token limits (--max-prompt-tokens, --max-total-tokens). The
// engine enforces them with its one token budget (engine/core/token_budget.h);
// they reach it as data in EngineOptions.
//
// Thread-safety: a free function over its arguments.
#pragma once

#include "engine/core/engine.h"

namespace gemma::server::ops {

struct RequestLimits {
  int max_prompt_tokens = 0;  // 0 = only the context bounds it
  int max_total_tokens = 0;   // prompt + max_tokens; 0 = only the context
};

// Hands the limits to the engine's admission.
void ApplyRequestLimits(const RequestLimits& limits, EngineOptions* engine_options);

}  // namespace gemma::server::ops
