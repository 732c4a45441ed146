// The one token budget of a request: how many output tokens it may have
// given its prompt, its own stopping.max_tokens (when set), the served
// context, the operator's limits and what the KV pool can hold. Request
// validation resolves it once at Submit; the length stop reads the result.
//
// Thread-safety: free functions over their arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gemma {

// Output budget when a request leaves stopping.max_tokens unset (further
// lowered to what the context and --max-total-tokens leave).
inline constexpr int kDefaultMaxTokens = 1024;

struct TokenLimits {
  int max_context = 0;        // prompt + output one sequence may hold
  int max_prompt_tokens = 0;  // --max-prompt-tokens; 0: only the context bounds it
  int max_total_tokens = 0;   // --max-total-tokens (prompt + max_tokens); 0: only the context
  int default_max_tokens = kDefaultMaxTokens;
};

// OK when the KV pool can ever hold a sequence of `num_tokens` tokens;
// otherwise INVALID_ARGUMENT saying what it would need.
using KvPoolCheck = std::function<absl::Status(int64_t num_tokens)>;

// The effective max_tokens. `requested` set: it must be >= 1 and fit every
// limit; unset: the default, lowered to what the context and
// --max-total-tokens leave. Either way prompt + max_tokens must fit the KV
// pool (`pool` may be null: no pool bound). Errors are INVALID_ARGUMENT and
// begin with the field the client set (stopping.max_tokens, or prompt).
absl::StatusOr<int> ResolveMaxTokens(int prompt_tokens, std::optional<int> requested,
                                     const TokenLimits& limits, const KvPoolCheck& pool);

// The length stop: true once `num_output` tokens spend the budget.
inline bool OutputBudgetSpent(int num_output, int max_tokens) { return num_output >= max_tokens; }

}  // namespace gemma
