#include "engine/core/event_delivery.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace gemma {
namespace {

// Records the token id of every event it receives, and the thread it ran on.
struct Recorder {
  std::mutex mu;
  std::vector<int> ids;
  std::vector<std::thread::id> threads;

  std::shared_ptr<const EventCallback> Callback() {
    return std::make_shared<const EventCallback>([this](GenerationEvent&& ev) {
      std::lock_guard<std::mutex> lock(mu);
      ids.push_back(ev.token_ids.empty() ? -1 : ev.token_ids[0]);
      threads.push_back(std::this_thread::get_id());
    });
  }
};

GenerationEvent Token(int id) {
  GenerationEvent ev;
  ev.token_ids.push_back(id);
  return ev;
}

TEST(EventDeliveryTest, DeliversEachCallbacksEventsInOrderOffThePostingThread) {
  Recorder a, b;
  {
    EventDelivery delivery;
    auto ca = a.Callback(), cb = b.Callback();
    for (int step = 0; step < 50; ++step) {
      delivery.Post(ca, Token(step));
      delivery.Post(cb, Token(1000 + step));
      delivery.Publish();
    }
    delivery.Drain();
    std::lock_guard<std::mutex> lock(a.mu);
    ASSERT_EQ(a.ids.size(), 50u);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(a.ids[i], i);
    for (std::thread::id id : a.threads) EXPECT_NE(id, std::this_thread::get_id());
  }
  ASSERT_EQ(b.ids.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(b.ids[i], 1000 + i);
}

TEST(EventDeliveryTest, NothingRunsBeforePublish) {
  Recorder r;
  EventDelivery delivery;
  delivery.Post(r.Callback(), Token(7));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::lock_guard<std::mutex> lock(r.mu);
    EXPECT_TRUE(r.ids.empty());
  }
  delivery.Drain();
  std::lock_guard<std::mutex> lock(r.mu);
  EXPECT_EQ(r.ids, std::vector<int>{7});
}

// Drain returns only once a slow callback has finished.
TEST(EventDeliveryTest, DrainWaitsForTheCallbackUnderWay) {
  std::atomic<bool> done{false};
  EventDelivery delivery;
  delivery.Post(std::make_shared<const EventCallback>([&](GenerationEvent&&) {
                  std::this_thread::sleep_for(std::chrono::milliseconds(50));
                  done = true;
                }),
                Token(1));
  delivery.Drain();
  EXPECT_TRUE(done.load());
}

// The destructor delivers what was posted and not yet published.
TEST(EventDeliveryTest, DestructorDeliversWhatIsPosted) {
  Recorder r;
  {
    EventDelivery delivery;
    auto c = r.Callback();
    delivery.Post(c, Token(1));
    delivery.Publish();
    delivery.Post(c, Token(2));
  }
  EXPECT_EQ(r.ids, (std::vector<int>{1, 2}));
}

// A callback whose owner is gone still runs: the queue holds a reference.
TEST(EventDeliveryTest, TheQueueKeepsTheCallbackAlive) {
  Recorder r;
  EventDelivery delivery;
  {
    auto c = r.Callback();
    delivery.Post(c, Token(5));
  }  // the poster's reference is dropped
  delivery.Drain();
  EXPECT_EQ(r.ids, std::vector<int>{5});
}

}  // namespace
}  // namespace gemma
