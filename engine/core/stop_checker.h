// Stop-string matching over streamed text, holding back just enough text that
// a stop string split across tokens is never emitted.
// Thread-safety: one per sequence.
#pragma once

#include <string>
#include <vector>

namespace gemma {

class StopChecker {
 public:
  explicit StopChecker(std::vector<std::string> stop_strings);

  // Adds generated text. Returns the text that is safe to emit now. When a
  // stop string completes, matched() is set and the returned text ends just
  // before it.
  // With `can_stop` false (before min_tokens), nothing is matched.
  std::string Push(const std::string& text, bool can_stop = true);
  // Releases held-back text (at the end of generation, no stop matched).
  std::string Flush();

  bool matched() const { return !matched_.empty(); }
  const std::string& matched_string() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  size_t holdback_ = 0;     // longest stop string - 1
  std::string pending_;     // text not yet emitted
  std::string matched_;
};

}  // namespace gemma
