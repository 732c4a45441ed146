#include "engine/core/token_budget.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace gemma {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// Prompt-only limits: there must be room for at least one output token.
absl::Status CheckPrompt(int prompt_tokens, const TokenLimits& limits) {
  using absl::StrCat;
  if (limits.max_context - prompt_tokens < 1) {
    return Invalid(StrCat("prompt has ", prompt_tokens, " tokens; the context holds ",
                          limits.max_context, " (prompt + output)"));
  }
  if (limits.max_prompt_tokens > 0 && prompt_tokens > limits.max_prompt_tokens) {
    return Invalid(StrCat("prompt has ", prompt_tokens, " tokens; --max-prompt-tokens is ",
                          limits.max_prompt_tokens));
  }
  if (limits.max_total_tokens > 0 && limits.max_total_tokens - prompt_tokens < 1) {
    return Invalid(StrCat("prompt has ", prompt_tokens,
                          " tokens, leaving no room for output under --max-total-tokens=",
                          limits.max_total_tokens, " (prompt + max_tokens)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> CheckRequested(int prompt_tokens, int max_tokens, const TokenLimits& limits) {
  using absl::StrCat;
  if (max_tokens < 1) return Invalid(StrCat("stopping.max_tokens must be >= 1, got ", max_tokens));
  const std::string head =
      StrCat("stopping.max_tokens = ", max_tokens, " plus the prompt's ", prompt_tokens, " tokens exceeds ");
  if (max_tokens > limits.max_context - prompt_tokens) {
    return Invalid(StrCat(head, "the context length ", limits.max_context));
  }
  if (limits.max_total_tokens > 0 && max_tokens > limits.max_total_tokens - prompt_tokens) {
    return Invalid(StrCat(head, "--max-total-tokens=", limits.max_total_tokens));
  }
  return max_tokens;
}

}  // namespace

absl::StatusOr<int> ResolveMaxTokens(int prompt_tokens, std::optional<int> requested,
                                     const TokenLimits& limits, const KvPoolCheck& pool) {
  if (absl::Status s = CheckPrompt(prompt_tokens, limits); !s.ok()) return s;
  int max_tokens = 0;
  if (requested.has_value()) {
    absl::StatusOr<int> checked = CheckRequested(prompt_tokens, *requested, limits);
    if (!checked.ok()) return checked.status();
    max_tokens = *checked;
  } else {
    max_tokens = std::min(limits.default_max_tokens, limits.max_context - prompt_tokens);
    if (limits.max_total_tokens > 0) {
      max_tokens = std::min(max_tokens, limits.max_total_tokens - prompt_tokens);
    }
  }
  if (pool == nullptr) return max_tokens;
  // A sequence the whole KV pool cannot hold would never finish: refused
  // now, like one beyond the context.
  if (absl::Status s = pool(int64_t{prompt_tokens} + max_tokens); !s.ok()) {
    return Invalid(requested.has_value()
                       ? absl::StrCat("stopping.max_tokens = ", max_tokens, " plus the prompt's ",
                                      prompt_tokens, " tokens: ", s.message())
                       : absl::StrCat("prompt has ", prompt_tokens, " tokens (max_tokens unset: ",
                                      max_tokens, "): ", s.message()));
  }
  return max_tokens;
}

}  // namespace gemma
