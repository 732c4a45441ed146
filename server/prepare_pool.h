// A few worker threads that tokenize prompts (build an engine request, render
// a chat) off the threads that serve other calls: a multi-megabyte prompt
// takes seconds to encode, and on a gRPC callback thread or an HTTP
// connection's strand it would stall every call sharing that thread.
//
// Small inputs are prepared at once on the calling thread: encoding a few
// kilobytes costs less than the hand-off, and a short request must not wait
// in line behind megabytes of someone else's prompt.
//
// The queue is bounded: Post refuses work (RESOURCE_EXHAUSTED naming the
// limit) once `max_queued` tasks wait, so a burst of huge prompts is told to
// retry instead of pinning memory for minutes.
//
// Each task is called exactly once: with run = true on a worker, or with
// run = false when it was still queued at CancelQueued or destruction, so
// that the call owning it can finish (and unregister its id) either way.
// Cancelling one queued task is the task's own business: it checks its
// call's state when it starts and returns at once if the client left.
//
// Thread-safety: all methods are safe from any thread; tasks run on the
// workers, several at once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace gemma::server {

struct PreparePoolOptions {
  int num_threads = 0;   // 0: min(4, hardware threads)
  int max_queued = 64;   // tasks waiting for a worker (running ones not counted)
  // Inputs below this many bytes run on the caller's thread (0: none do).
  size_t inline_below_bytes = 16 << 10;
};

class PreparePool {
 public:
  using Task = std::function<void(bool run)>;

  explicit PreparePool(const PreparePoolOptions& options = {});
  // Shutdown().
  ~PreparePool();
  PreparePool(const PreparePool&) = delete;
  PreparePool& operator=(const PreparePool&) = delete;

  // Runs `task` now on this thread when `input_bytes` (the prompt's size) is
  // below inline_below_bytes; else queues it. RESOURCE_EXHAUSTED (and `task`
  // is not called) when max_queued tasks already wait, UNAVAILABLE after
  // Shutdown.
  absl::Status Post(size_t input_bytes, Task task);
  // Calls every task queued now with run = false (on the calling thread).
  void CancelQueued();
  // Lets the running tasks finish, joins the workers, then cancels what is
  // queued (CancelQueued). Post refuses work from now on (UNAVAILABLE): with
  // no worker left, a queued task would never be called. Idempotent.
  void Shutdown();
  int num_threads() const { return static_cast<int>(workers_.size()); }
  // Tasks waiting plus tasks running.
  int pending() const;

 private:
  void Work();

  const int max_queued_;
  const size_t inline_below_bytes_;
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<Task> queue_;
  int running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace gemma::server
