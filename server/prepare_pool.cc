#include "server/prepare_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gemma::server {

PreparePool::PreparePool(const PreparePoolOptions& options)
    : max_queued_(std::max(0, options.max_queued)),
      inline_below_bytes_(options.inline_below_bytes) {
  int n = options.num_threads;
  if (n <= 0) n = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 4);
  workers_.reserve(n);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { Work(); });
}

PreparePool::~PreparePool() { Shutdown(); }

void PreparePool::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& worker : workers_) {
    if (worker.joinable() && worker.get_id() != std::this_thread::get_id()) worker.join();
  }
  CancelQueued();
}

absl::Status PreparePool::Post(size_t input_bytes, Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
  }
  if (input_bytes < inline_below_bytes_) {
    task(true);
    return absl::OkStatus();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
    if (static_cast<int>(queue_.size()) >= max_queued_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the prompt preparation queue is full (", max_queued_, " requests wait for one of ",
          workers_.size(), " tokenizer threads); retry later"));
    }
    queue_.push_back(std::move(task));
  }
  ready_.notify_one();
  return absl::OkStatus();
}

void PreparePool::CancelQueued() {
  std::deque<Task> cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled.swap(queue_);
  }
  for (Task& task : cancelled) task(false);
}

int PreparePool::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size()) + running_;
}

void PreparePool::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Task task = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    task(true);
    task = nullptr;  // the task's captures die off the lock
    lock.lock();
    --running_;
  }
}

}  // namespace gemma::server
