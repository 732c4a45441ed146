#include "server/ops/limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gemma::server::ops {

absl::Status ApplyRequestLimits(const v1::GenerateRequest& proto, const RequestLimits& limits,
                                GenerationRequest* request) {
  const int prompt_tokens = static_cast<int>(request->prompt_ids.size());
  if (limits.max_prompt_tokens > 0 && prompt_tokens > limits.max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("prompt has ", prompt_tokens,
                                                   " tokens; --max-prompt-tokens is ",
                                                   limits.max_prompt_tokens));
  }
  if (limits.max_total_tokens <= 0) return absl::OkStatus();
  const int room = limits.max_total_tokens - prompt_tokens;
  StoppingCriteria& stopping = request->stopping;
  if (room < 1) {
    return absl::InvalidArgumentError(absl::StrCat("prompt has ", prompt_tokens,
                                                   " tokens, leaving no room for output under "
                                                   "--max-total-tokens=",
                                                   limits.max_total_tokens,
                                                   " (prompt + max_tokens)"));
  }
  if (proto.stopping().has_max_tokens()) {
    if (stopping.max_tokens > room) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stopping.max_tokens = ", stopping.max_tokens, " plus the prompt's ", prompt_tokens,
          " tokens exceeds --max-total-tokens=", limits.max_total_tokens));
    }
    return absl::OkStatus();
  }
  stopping.max_tokens = std::min(stopping.max_tokens, room);
  if (stopping.min_tokens > stopping.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stopping.min_tokens = ", stopping.min_tokens, " exceeds the ", stopping.max_tokens,
        " output tokens --max-total-tokens=", limits.max_total_tokens, " leaves"));
  }
  return absl::OkStatus();
}

}  // namespace gemma::server::ops
