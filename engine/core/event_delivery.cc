#include "engine/core/event_delivery.h"

#include <iterator>

namespace gemma {

EventDelivery::EventDelivery() : thread_([this] { Run(); }) {}

EventDelivery::~EventDelivery() {
  Publish();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void EventDelivery::Post(std::shared_ptr<const EventCallback> callback, GenerationEvent event) {
  posted_.emplace_back(std::move(callback), std::move(event));
}

void EventDelivery::Publish() {
  if (posted_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.insert(queue_.end(), std::make_move_iterator(posted_.begin()), std::make_move_iterator(posted_.end()));
  }
  posted_.clear();
  wake_.notify_one();
}

void EventDelivery::Drain() {
  Publish();
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return queue_.empty() && !delivering_; });
}

void EventDelivery::Run() {
  std::vector<Item> batch;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) return;  // stopping, and everything delivered
    batch.swap(queue_);
    delivering_ = true;
    lock.unlock();
    for (Item& item : batch) (*item.first)(std::move(item.second));
    batch.clear();  // drops the callbacks' references outside the lock
    lock.lock();
    delivering_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace gemma
