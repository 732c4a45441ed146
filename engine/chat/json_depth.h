// A bound on how deeply caller JSON nests, checked without recursion.
// Serializing, copying or converting a value (nlohmann's dump, the Jinja
// interpreter's Value::FromJson) recurses once per level, so a small body
// of nested brackets (20 000 levels in 40 KB) would otherwise exhaust a
// thread's stack. Front doors check what callers send before anything
// walks it recursively.
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gemma {

// Far deeper than any tool schema or chat message needs, far shallower
// than the recursion a thread's stack holds.
inline constexpr int kMaxJsonDepth = 128;

// When `root` nests arrays and objects more than `max_depth` levels deep
// (root itself being level 1), the path of the first container past the
// limit, e.g. "tools[0].function.parameters.x[0]" (below `prefix`; its
// first dozen steps, then "..."); else nullopt. J: an nlohmann json type.
template <typename J>
std::optional<std::string> JsonTooDeep(const J& root, int max_depth = kMaxJsonDepth, std::string_view prefix = "") {
  if (!root.is_structured()) return std::nullopt;
  struct Frame {
    const J* node;
    typename J::const_iterator it;
  };
  std::vector<Frame> path{{&root, root.cbegin()}};  // the containers from the root to the one being walked
  while (!path.empty()) {
    Frame& top = path.back();
    if (top.it == top.node->cend()) {
      path.pop_back();
      if (!path.empty()) ++path.back().it;
      continue;
    }
    const J& child = *top.it;
    if (!child.is_structured()) {
      ++top.it;
      continue;
    }
    if (static_cast<int>(path.size()) >= max_depth) {
      constexpr size_t kShownSteps = 12;
      std::string where(prefix);
      for (size_t i = 0; i < path.size() && i < kShownSteps; ++i) {
        const Frame& f = path[i];
        if (f.node->is_object()) {
          if (!where.empty()) where += '.';
          where += f.it.key();
        } else {
          where += '[' + std::to_string(std::distance(f.node->cbegin(), f.it)) + ']';
        }
      }
      if (path.size() > kShownSteps) where += "...";
      return where;
    }
    if (child.empty()) {
      ++top.it;
      continue;
    }
    path.push_back({&child, child.cbegin()});
  }
  return std::nullopt;
}

}  // namespace gemma
