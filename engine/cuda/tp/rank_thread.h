// A thread that owns one tensor-parallel rank's GPU: it selects the device
// once and runs the tasks it is given, one at a time, so every CUDA call of
// a rank (set-up, passes, tear-down) happens on the rank's own thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <cuda_runtime.h>

namespace gemma::cuda {

class RankThread {
 public:
  explicit RankThread(int device) : thread_([this, device] { Loop(device); }) {}
  ~RankThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  RankThread(const RankThread&) = delete;
  RankThread& operator=(const RankThread&) = delete;

  // Starts `task` on the rank's thread. REQUIRES: the previous one waited for.
  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      task_ = std::move(task);
      busy_ = true;
    }
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
  }

 private:
  void Loop(int device) {
    cudaSetDevice(device);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || (busy_ && task_); });
      if (stop_) return;
      std::function<void()> task = std::move(task_);
      task_ = nullptr;
      lock.unlock();
      task();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> task_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the state above exists
};

}  // namespace gemma::cuda
