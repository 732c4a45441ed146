#include "server/ops/limits.h"

namespace gemma::server::ops {

void ApplyRequestLimits(const RequestLimits& limits, EngineOptions* engine_options) {
  engine_options->max_prompt_tokens = limits.max_prompt_tokens;
  engine_options->max_total_tokens = limits.max_total_tokens;
}

}  // namespace gemma::server::ops
