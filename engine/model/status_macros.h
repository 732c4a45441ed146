// Private to engine/model: early-return helpers for absl::Status(Or).
// Prefixed MODEL_ so they cannot collide with another module's macros.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MODEL_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::absl::Status model_status_ = (expr);     \
    if (!model_status_.ok()) return model_status_; \
  } while (0)

#define MODEL_CONCAT_INNER_(a, b) a##b
#define MODEL_CONCAT_(a, b) MODEL_CONCAT_INNER_(a, b)

// MODEL_ASSIGN_OR_RETURN(auto x, F()); declares/assigns x or returns F's error.
#define MODEL_ASSIGN_OR_RETURN(lhs, expr) \
  MODEL_ASSIGN_OR_RETURN_IMPL_(MODEL_CONCAT_(model_statusor_, __LINE__), lhs, expr)

#define MODEL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
