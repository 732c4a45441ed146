// Transparent hashing of std::string keys, so hash maps can be searched with
// a std::string_view without building a string. (Debian's Abseil has its own
// absl::string_view class, which its default string hash expects.)
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace gemma {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

struct StringViewEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

}  // namespace gemma
