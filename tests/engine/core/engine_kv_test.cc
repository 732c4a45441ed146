// Paged KV through the engine (CPU backend, fortunes model): preemption and
// prefix-cache hits must not change outputs, and after many random requests
// with random cancellations every block is free again.
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "engine/core/engine.h"
#include "engine/factory/backend_factory.h"
#include "tests/common/request_runner.h"
#include "gtest/gtest.h"

namespace gemma {
namespace {

const std::string kModel = GEMMA_MODELS_DIR "/gemma4-fortunes";

using Result = testing::RunResult;
using Runner = testing::RequestRunner;

class EngineKvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = Tokenizer::Load(kModel + "/tokenizer.model");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
  }
  std::unique_ptr<Engine> MakeEngine(int slots, int num_blocks, int tokens_per_step = 64) {
    BackendOptions bo;
    bo.backend = "cpu";
    bo.model_dir = kModel;
    bo.max_slots = slots;
    bo.max_context = 256;
    bo.kv_block_size = 8;
    bo.num_kv_blocks = num_blocks;
    auto backend = CreateBackend(bo);
    EXPECT_TRUE(backend.ok()) << backend.status();
    EngineOptions eo;
    eo.max_tokens_per_step = tokens_per_step;
    eo.max_queue = 4096;
    auto engine = Engine::Create(eo, std::move(*backend), tokenizer_.get());
    EXPECT_TRUE(engine.ok()) << engine.status();
    return std::move(*engine);
  }
  GenerationRequest Request(const std::string& prompt, int max_tokens, std::optional<uint64_t> seed = {}) {
    GenerationRequest r;
    r.prompt_ids = *tokenizer_->EncodePrompt(prompt);
    r.sampling.temperature = seed ? 0.9f : 0.0f;
    r.sampling.seed = seed;
    r.stopping.max_tokens = max_tokens;
    r.stopping.ignore_eos = true;
    return r;
  }
  static void ExpectAllBlocksFree(Engine& engine) {
    for (int i = 0; i < 400; ++i) {
      const EngineStats s = engine.Stats();
      if (s.running == 0 && s.waiting == 0 && s.kv_free_blocks == s.kv_total_blocks) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const EngineStats s = engine.Stats();
    EXPECT_EQ(s.kv_free_blocks, s.kv_total_blocks);
    EXPECT_EQ(s.running, 0);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

const char* kPrompts[] = {"The quick brown fox", "Love is", "You will be", "Never trust a", "A fool and his money",
                          "Today is", "Q:\tWhy?\nA:", "The best way to"};

TEST_F(EngineKvTest, PreemptedAndResumedOutputsAreIdentical) {
  std::vector<std::vector<int32_t>> alone;
  {
    auto engine = MakeEngine(1, 0);
    for (size_t i = 0; i < std::size(kPrompts); ++i) {
      Runner r(engine.get());
      r.Submit(Request(kPrompts[i], 80, i % 2 ? std::optional<uint64_t>(i) : std::nullopt));
      alone.push_back(r.Wait()[0].ids);
    }
  }
  // 8 sequences growing to ~90 tokens need ~12 blocks each; 40 blocks force
  // preemptions (newest first) and recomputation.
  auto engine = MakeEngine(8, 40);
  Runner r(engine.get());
  for (size_t i = 0; i < std::size(kPrompts); ++i)
    r.Submit(Request(kPrompts[i], 80, i % 2 ? std::optional<uint64_t>(i) : std::nullopt));
  const std::vector<Result> got = r.Wait();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].ids, alone[i]) << kPrompts[i];
  EXPECT_GT(engine->Stats().preemptions, 0);
  ExpectAllBlocksFree(*engine);
}

TEST_F(EngineKvTest, PrefixCacheHitGivesIdenticalOutputAndReportsCachedTokens) {
  // A prompt longer than the fortunes window (64) so sliding layers matter.
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "The quick brown fox jumps. ";
  auto engine = MakeEngine(2, 0);
  Runner first(engine.get());
  first.Submit(Request(prompt, 24));
  const Result cold = first.Wait()[0];
  EXPECT_EQ(cold.last.usage.cached_tokens, 0);
  Runner second(engine.get());
  second.Submit(Request(prompt, 24));
  const Result warm = second.Wait()[0];
  EXPECT_EQ(warm.ids, cold.ids);
  const int prompt_len = cold.last.usage.prompt_tokens;
  EXPECT_EQ(warm.last.usage.cached_tokens, (prompt_len - 1) / 8 * 8);
  EXPECT_GT(engine->Stats().prefix_cache_hits, 0);
  // A different continuation of a shared prefix reuses only the shared blocks.
  Runner third(engine.get());
  third.Submit(Request(prompt + "Love is", 8));
  EXPECT_GT(third.Wait()[0].last.usage.cached_tokens, 0);
  ExpectAllBlocksFree(*engine);
}

TEST_F(EngineKvTest, ThousandRandomRequestsWithCancellationsReturnEveryBlock) {
  auto engine = MakeEngine(8, 64, 32);
  std::mt19937 rng(1234);
  std::atomic<int> finished{0};
  const int kRequests = 1000;
  std::vector<std::string> ids;
  for (int i = 0; i < kRequests; ++i) {
    GenerationRequest r;
    const int len = 1 + rng() % 40;
    for (int t = 0; t < len; ++t) r.prompt_ids.push_back(3 + rng() % 1000);
    r.prompt_ids[0] = 2;
    r.sampling.temperature = (rng() % 2) ? 0.0f : 1.0f;
    r.stopping.max_tokens = 1 + rng() % 12;
    r.stopping.ignore_eos = rng() % 2;
    r.request_id = "r" + std::to_string(i);
    ASSERT_TRUE(engine->Submit(r, [&](GenerationEvent&& ev) { if (ev.finished) ++finished; }).ok());
    if (rng() % 3 == 0) engine->Cancel("r" + std::to_string(rng() % (i + 1)));
  }
  for (int i = 0; i < 6000 && finished < kRequests; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(finished.load(), kRequests);
  ExpectAllBlocksFree(*engine);
}

}  // namespace
}  // namespace gemma

namespace gemma {
namespace {

TEST_F(EngineKvTest, RequestLargerThanThePoolIsRejectedByName) {
  auto engine = MakeEngine(1, 4);  // 4 blocks of 8 tokens
  GenerationRequest r = Request("Love is", 40);
  const absl::Status s = engine->Submit(r, [](GenerationEvent&&) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("KV blocks; the pool has 4"), std::string::npos) << s;
  GenerationRequest fits = Request("Love is", 8);
  Runner r2(engine.get());
  r2.Submit(fits);
  EXPECT_EQ(r2.Wait()[0].last.usage.completion_tokens, 8);
}

}  // namespace
}  // namespace gemma
