#include "server/active_calls.h"

namespace gemma::server {

bool ActiveCalls::Add(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return ids_.insert(id).second;
}

void ActiveCalls::Remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  ids_.erase(id);
  if (ids_.empty()) empty_.notify_all();
}

int ActiveCalls::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(ids_.size());
}

bool ActiveCalls::WaitUntilEmpty(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return empty_.wait_until(lock, deadline, [this] { return ids_.empty(); });
}

}  // namespace gemma::server
