#include "engine/core/stop_checker.h"

#include <algorithm>

namespace gemma {

StopChecker::StopChecker(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
  for (const std::string& s : stops_) holdback_ = std::max(holdback_, s.size() - 1);
}

std::string StopChecker::Push(const std::string& text, bool can_stop) {
  if (matched()) return "";
  pending_ += text;
  size_t earliest = std::string::npos;
  for (const std::string& s : can_stop ? stops_ : std::vector<std::string>{}) {
    const size_t at = pending_.find(s);
    if (at != std::string::npos && at < earliest) {
      earliest = at;
      matched_ = s;
    }
  }
  if (earliest != std::string::npos) {
    std::string out = pending_.substr(0, earliest);
    pending_.clear();
    return out;
  }
  if (pending_.size() <= holdback_) return "";
  // Keep the tail that could still be the start of a stop string, without
  // splitting a UTF-8 character.
  size_t cut = pending_.size() - holdback_;
  while (cut > 0 && (static_cast<unsigned char>(pending_[cut]) & 0xC0) == 0x80) --cut;
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

std::string StopChecker::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace gemma
