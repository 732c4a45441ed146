// The Generate streams in flight, by request id: rejects duplicate ids (the
// engine cancels by id, so two live streams must never share one) and lets a
// drain wait until every stream has ended.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <unordered_set>

namespace gemma::server {

class ActiveCalls {
 public:
  // False when `id` is already in flight.
  bool Add(const std::string& id);
  void Remove(const std::string& id);
  int size() const;
  // True when every stream ended before `deadline`.
  bool WaitUntilEmpty(std::chrono::steady_clock::time_point deadline);

 private:
  mutable std::mutex mu_;
  std::condition_variable empty_;
  std::unordered_set<std::string> ids_;
};

}  // namespace gemma::server
