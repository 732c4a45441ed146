// Admission and preemption through the engine (CPU backend, fortunes model:
// window 64): no request waits forever. One the KV pool can never hold is
// refused at submit; every other one finishes — a prompt longer than the
// sliding pool, a long request behind short ones, random mixes with forced
// preemption — with the outputs of its solo run, and the pool ends full.
#include <algorithm>
#include <optional>
#include <random>
#include <thread>

#include "tests/engine/core/admission_test_util.h"

namespace gemma {
namespace {

using namespace std::chrono_literals;
using testing::Collector;
using testing::EngineShape;
using testing::ExpectPoolFull;
using testing::MakeEngine;

constexpr int kWindow = 64;  // the fortunes model's sliding window

int NumBlocks(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

// What the engine must refuse: more global blocks than the pool, or more
// sliding blocks than a window plus one step's chunk can hold at once.
bool PoolCanHold(const EngineShape& shape, int num_tokens) {
  const int global = NumBlocks(num_tokens, shape.block_size);
  const int num_global = shape.num_blocks > 0 ? shape.num_blocks
                                              : shape.max_slots * NumBlocks(shape.max_context, shape.block_size);
  const int num_sliding = shape.num_sliding_blocks > 0 ? std::min(shape.num_sliding_blocks, num_global) : num_global;
  const int chunk = std::min(shape.max_tokens_per_step, num_tokens);
  const int sliding = std::min(global, NumBlocks(kWindow - 1 + chunk, shape.block_size) + 1);
  return global <= num_global && sliding <= num_sliding;
}

class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = Tokenizer::Load(testing::kFortunesDir + "/tokenizer.model");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
  }

  static GenerationRequest Request(std::vector<int32_t> prompt, int max_tokens, std::optional<uint64_t> seed = {}) {
    GenerationRequest r;
    r.prompt_ids = std::move(prompt);
    r.sampling.temperature = seed ? 0.9f : 0.0f;
    r.sampling.seed = seed;
    r.stopping.max_tokens = max_tokens;
    r.stopping.ignore_eos = true;
    return r;
  }
  static std::vector<int32_t> RandomPrompt(std::mt19937& rng, int length) {
    std::vector<int32_t> ids(length);
    for (int32_t& id : ids) id = 3 + static_cast<int32_t>(rng() % 1000);
    ids[0] = 2;  // bos
    return ids;
  }
  // The request's tokens when it runs alone with all the KV it wants.
  std::vector<int32_t> Solo(const GenerationRequest& request) {
    if (!solo_engine_)
      solo_engine_ = MakeEngine({.max_slots = 1, .max_context = 512, .max_tokens_per_step = 64}, tokenizer_.get());
    Collector c(solo_engine_.get());
    EXPECT_TRUE(c.Submit(request).ok());
    EXPECT_TRUE(c.WaitAll(120s));
    return c.outcome(0).ids;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Engine> solo_engine_;
};

// The GPU deadlock: admission asked the sliding pool for a block per prompt
// position, so a prompt longer than the sliding pool waited forever.
TEST_F(AdmissionTest, PromptLongerThanTheSlidingPoolCompletes) {
  std::mt19937 rng(1);
  const EngineShape shape{
      .max_slots = 2, .max_context = 512, .num_blocks = 64, .num_sliding_blocks = 13, .max_tokens_per_step = 32};
  ASSERT_TRUE(PoolCanHold(shape, 416));
  auto engine = MakeEngine(shape, tokenizer_.get());
  ASSERT_NE(engine, nullptr);
  const GenerationRequest request = Request(RandomPrompt(rng, 400), 16);
  Collector c(engine.get());
  ASSERT_TRUE(c.Submit(request).ok());
  ASSERT_TRUE(c.WaitAll(120s)) << "a 400-token prompt never finished with a 13-block (104-token) sliding pool";
  EXPECT_EQ(c.outcome(0).last.finish_reason, FinishReason::kLength);
  EXPECT_EQ(c.outcome(0).ids, Solo(request));
  ExpectPoolFull(*engine);
}

TEST_F(AdmissionTest, RequestsThePoolCanNeverHoldAreRefusedAtSubmit) {
  std::mt19937 rng(2);
  // Global pool: 32 blocks of 8 tokens; sliding pool one block short of a
  // window (64) plus a step (32): ceil(95 / 8) + 1 - 1 = 12.
  const EngineShape shape{
      .max_slots = 2, .max_context = 512, .num_blocks = 32, .num_sliding_blocks = 12, .max_tokens_per_step = 32};
  auto engine = MakeEngine(shape, tokenizer_.get());
  ASSERT_NE(engine, nullptr);
  const absl::Status global = engine->Submit(Request(RandomPrompt(rng, 200), 57), [](GenerationEvent&&) {});
  EXPECT_EQ(global.code(), absl::StatusCode::kInvalidArgument) << global;
  EXPECT_NE(global.message().find("257 tokens need 33 KV blocks; the pool has 32"), std::string::npos) << global;
  const absl::Status sliding = engine->Submit(Request(RandomPrompt(rng, 90), 8), [](GenerationEvent&&) {});
  EXPECT_EQ(sliding.code(), absl::StatusCode::kInvalidArgument) << sliding;
  EXPECT_NE(sliding.message().find("sliding pool has 12"), std::string::npos) << sliding;
  // Short ones (at most 12 blocks in all) still run.
  Collector c(engine.get());
  ASSERT_TRUE(c.Submit(Request(RandomPrompt(rng, 80), 16)).ok());
  ASSERT_TRUE(c.WaitAll(60s));
  EXPECT_EQ(c.outcome(0).last.finish_reason, FinishReason::kLength);
  ExpectPoolFull(*engine);
}

// A long request that needs blocks the running ones hold gets them as they
// finish: requests submitted after it are not admitted before it.
TEST_F(AdmissionTest, LongRequestAtTheHeadIsNotOvertaken) {
  std::mt19937 rng(3);
  const EngineShape shape{.max_slots = 4, .num_blocks = 32, .max_tokens_per_step = 32};
  auto engine = MakeEngine(shape, tokenizer_.get());
  ASSERT_NE(engine, nullptr);
  Collector c(engine.get());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.Submit(Request(RandomPrompt(rng, 60), 40)).ok());
  std::this_thread::sleep_for(20ms);
  const GenerationRequest long_request = Request(RandomPrompt(rng, 200), 30);  // 29 of the 32 blocks
  ASSERT_TRUE(c.Submit(long_request).ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(c.Submit(Request(RandomPrompt(rng, 10), 8)).ok());
  ASSERT_TRUE(c.WaitAll(120s));
  auto scheduled_at = [&](size_t i) {
    const testing::Outcome& o = c.outcome(i);
    return o.submitted_at + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double, std::milli>(o.last.timings.queue_ms));
  };
  for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c.outcome(i).last.finish_reason, FinishReason::kLength) << i;
  for (size_t i = 4; i < c.size(); ++i) EXPECT_GE(scheduled_at(i), scheduled_at(3) - 1ms) << "request " << i;
  EXPECT_EQ(c.outcome(3).ids, Solo(long_request));
  ExpectPoolFull(*engine);
}

// Random mixes of long and short requests over random pools and slot counts
// (small pools force preemption): each request finishes normally with its
// solo output, or is refused at submit exactly when the pool cannot hold it.
TEST_F(AdmissionTest, RandomMixesFinishOrAreRefusedAndReturnTheWholePool) {
  std::mt19937 rng(20240601);
  int64_t preemptions = 0;
  int refused = 0, finished = 0;
  for (int run = 0; run < 8; ++run) {
    EngineShape shape;
    shape.block_size = 4 << (rng() % 3);  // 4, 8, 16
    shape.max_slots = 1 + static_cast<int>(rng() % 6);
    shape.max_tokens_per_step = 8 + static_cast<int>(rng() % 57);
    const int full = NumBlocks(shape.max_context, shape.block_size);
    shape.num_blocks = full / 4 + static_cast<int>(rng() % full);
    const int sliding_peak = NumBlocks(kWindow - 1 + shape.max_tokens_per_step, shape.block_size) + 1;
    shape.num_sliding_blocks = std::max(1, sliding_peak - 1 + static_cast<int>(rng() % (2 * sliding_peak)));
    SCOPED_TRACE(::testing::Message() << "run " << run << ": B=" << shape.block_size << " slots=" << shape.max_slots
                                      << " step=" << shape.max_tokens_per_step << " global=" << shape.num_blocks
                                      << " sliding=" << shape.num_sliding_blocks);
    auto engine = MakeEngine(shape, tokenizer_.get());
    ASSERT_NE(engine, nullptr);
    Collector c(engine.get());
    std::vector<GenerationRequest> requests;
    std::vector<bool> expect_ok;
    const int num_requests = 6 + static_cast<int>(rng() % 7);
    for (int i = 0; i < num_requests; ++i) {
      const bool is_long = rng() % 3 == 0;
      const int prompt = is_long ? 100 + static_cast<int>(rng() % 120) : 2 + static_cast<int>(rng() % 30);
      const int max_tokens = 1 + static_cast<int>(rng() % std::min(30, shape.max_context - prompt));
      const std::optional<uint64_t> seed = rng() % 2 ? std::optional<uint64_t>(rng()) : std::nullopt;
      GenerationRequest r = Request(RandomPrompt(rng, prompt), max_tokens, seed);
      r.priority = rng() % 4 == 0 ? 1 : 0;
      const absl::Status s = c.Submit(r);
      const bool ok = PoolCanHold(shape, prompt + max_tokens);
      EXPECT_EQ(s.ok(), ok) << "request " << i << " (" << prompt << " + " << max_tokens << "): " << s;
      if (!s.ok()) EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      requests.push_back(std::move(r));
      expect_ok.push_back(s.ok());
      if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 20));
    }
    if (!c.WaitAll(180s)) {
      engine->Shutdown(0ms);
      FAIL() << "requests still unfinished after 180 s";
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      if (!expect_ok[i]) {
        ++refused;
        continue;
      }
      const testing::Outcome& o = c.outcome(i);
      EXPECT_EQ(o.last.finish_reason, FinishReason::kLength) << "request " << i << ": " << o.last.error;
      EXPECT_EQ(static_cast<int>(o.ids.size()), requests[i].stopping.max_tokens) << "request " << i;
      EXPECT_EQ(o.ids, Solo(requests[i])) << "request " << i;
      ++finished;
    }
    preemptions += engine->Stats().preemptions;
    ExpectPoolFull(*engine);
  }
  EXPECT_GT(preemptions, 0) << "no run was small enough to preempt";
  EXPECT_GT(refused, 0);
  EXPECT_GT(finished, 0);
}

}  // namespace
}  // namespace gemma
