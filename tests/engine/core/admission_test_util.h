// Helpers for the admission tests: engines over the CPU backend with chosen
// pools, and a collector that waits for every request with a deadline (a
// request that never finishes fails the test instead of hanging it).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/engine.h"
#include "engine/factory/backend_factory.h"
#include "tests/engine/core/sliding_pool_backend.h"

namespace gemma::testing {

inline const std::string kFortunesDir = GEMMA_MODELS_DIR "/gemma4-fortunes";
inline const std::string kTinyDir = GEMMA_TEST_DATA "/gemma4-tiny-random";

struct EngineShape {
  std::string model_dir = kFortunesDir;
  int max_slots = 4;
  int max_context = 256;
  int block_size = 8;
  int num_blocks = 0;          // global pool; 0: max_slots full contexts
  int num_sliding_blocks = 0;  // 0: as the global pool
  int max_tokens_per_step = 32;
};

inline std::unique_ptr<Engine> MakeEngine(const EngineShape& shape, const Tokenizer* tokenizer) {
  BackendOptions bo;
  bo.backend = "cpu";
  bo.model_dir = shape.model_dir;
  bo.max_slots = shape.max_slots;
  bo.max_context = shape.max_context;
  bo.kv_block_size = shape.block_size;
  bo.num_kv_blocks = shape.num_blocks;
  bo.num_threads = 1;
  auto backend = CreateBackend(bo);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return nullptr;
  EngineOptions eo;
  eo.max_tokens_per_step = shape.max_tokens_per_step;
  eo.max_queue = 4096;
  auto engine = Engine::Create(
      eo, std::make_unique<SlidingPoolBackend>(std::move(*backend), shape.num_sliding_blocks), tokenizer);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

struct Outcome {
  absl::Status submit_status;
  std::vector<int32_t> ids;
  GenerationEvent last;  // the final event
  bool finished = false;
  std::chrono::steady_clock::time_point submitted_at;
};

// Thread-safety: Submit from one thread; callbacks from the engine thread.
class Collector {
 public:
  explicit Collector(Engine* engine) : engine_(engine) {}

  // The Submit status; an accepted request's events land in outcome(i).
  absl::Status Submit(GenerationRequest request) {
    Outcome* out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      outcomes_.push_back(std::make_unique<Outcome>());
      out = outcomes_.back().get();
      out->submitted_at = std::chrono::steady_clock::now();
      ++pending_;
    }
    out->submit_status = engine_->Submit(std::move(request), [this, out](GenerationEvent&& ev) {
      std::lock_guard<std::mutex> lock(mu_);
      out->ids.insert(out->ids.end(), ev.token_ids.begin(), ev.token_ids.end());
      if (!ev.finished) return;
      out->last = std::move(ev);
      out->finished = true;
      if (--pending_ == 0) cv_.notify_all();
    });
    if (!out->submit_status.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) cv_.notify_all();
    }
    return out->submit_status;
  }
  // True when every accepted request finished within `timeout`.
  bool WaitAll(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pending_ == 0; });
  }
  // REQUIRES: WaitAll returned true (or the engine is shut down).
  const Outcome& outcome(size_t i) const { return *outcomes_[i]; }
  size_t size() const { return outcomes_.size(); }

 private:
  Engine* engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Outcome>> outcomes_;
  int pending_ = 0;
};

// Waits (bounded) until nothing runs or waits and every KV block is free.
inline void ExpectPoolFull(Engine& engine) {
  for (int i = 0; i < 400; ++i) {
    const EngineStats s = engine.Stats();
    if (s.running == 0 && s.waiting == 0 && s.kv_free_blocks == s.kv_total_blocks) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const EngineStats s = engine.Stats();
  EXPECT_EQ(s.kv_free_blocks, s.kv_total_blocks);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
}

}  // namespace gemma::testing
