// Private to engine/model: StrCat that also takes std::string_view. The
// system abseil is built with its own absl::string_view, which StrCat's
// AlphaNum does not accept from std::string_view.
#pragma once

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace gemma::model_internal {

inline absl::string_view ToAbsl(std::string_view s) { return {s.data(), s.size()}; }
template <typename T>
const T& ToAbsl(const T& value) {
  return value;
}

template <typename... Args>
std::string Cat(const Args&... args) {
  return absl::StrCat(ToAbsl(args)...);
}

}  // namespace gemma::model_internal
