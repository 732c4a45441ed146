// Test helper: submits requests to one engine concurrently and collects
// each one's tokens and final event.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "engine/core/engine.h"

namespace gemma::testing {

struct RunResult {
  std::vector<int32_t> ids;
  GenerationEvent last;
};

class RequestRunner {
 public:
  explicit RequestRunner(Engine* engine) : engine_(engine) {}
  void Submit(GenerationRequest r) {
    size_t i;
    {
      std::lock_guard<std::mutex> lock(mu_);  // callbacks of earlier requests may be running
      i = results_.size();
      results_.emplace_back();
      ++pending_;
    }
    const absl::Status st = engine_->Submit(std::move(r), [this, i](GenerationEvent&& ev) {
      std::lock_guard<std::mutex> lock(mu_);
      results_[i].ids.insert(results_[i].ids.end(), ev.token_ids.begin(), ev.token_ids.end());
      if (ev.finished) {
        results_[i].last = std::move(ev);
        if (--pending_ == 0) cv_.notify_all();
      }
    });
    ASSERT_TRUE(st.ok()) << st;
  }
  // Every submitted request's result, in submission order.
  std::vector<RunResult> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(300), [&] { return pending_ == 0; }));
    return results_;
  }

 private:
  Engine* engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RunResult> results_;
  int pending_ = 0;
};

}  // namespace gemma::testing
