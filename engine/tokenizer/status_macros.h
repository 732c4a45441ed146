// Private to engine/tokenizer: early-return helpers for absl::Status(Or).
// Prefixed TOKENIZER_ so they cannot collide with another module's macros.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TOKENIZER_RETURN_IF_ERROR(expr)                      \
  do {                                                       \
    ::absl::Status tokenizer_status_ = (expr);               \
    if (!tokenizer_status_.ok()) return tokenizer_status_;   \
  } while (0)

#define TOKENIZER_CONCAT_INNER_(a, b) a##b
#define TOKENIZER_CONCAT_(a, b) TOKENIZER_CONCAT_INNER_(a, b)

// TOKENIZER_ASSIGN_OR_RETURN(auto x, F()); declares/assigns x or returns F's error.
#define TOKENIZER_ASSIGN_OR_RETURN(lhs, expr) \
  TOKENIZER_ASSIGN_OR_RETURN_IMPL_(TOKENIZER_CONCAT_(tokenizer_statusor_, __LINE__), lhs, expr)

#define TOKENIZER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return tmp.status();                    \
  lhs = std::move(tmp).value()
