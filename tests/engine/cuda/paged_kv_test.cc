// The CUDA backend's paged KV cache:
// - the same sequences through scrambled block tables (sliding blocks that
//   left the window released, as the engine's block manager does) give the
//   same logits as through the block manager's own tables (SlotTables): only
//   the addressing differs;
// - through the engine (batching, preemption by recompute, prefix-cache
//   hits) greedy tokens equal the fixture's golden tokens up to its first
//   low-margin step, and every block is free afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <thread>

#include "engine/core/engine.h"
#include "engine/core/slot_tables.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/common/gpu_test_util.h"
#include "tests/common/request_runner.h"
#include "tests/engine/cuda/golden.h"

namespace gemma {
namespace {

constexpr int kBlock = 16;
constexpr double kMarginFloor = 0.1;  // below this a greedy step may flip (fixtures/README)

std::string FortunesDir() {
  const char* v = std::getenv("GEMMA_MODELS_DIR");
  return std::string(v && *v ? v : GEMMA_MODELS_DIR) + "/gemma4-fortunes";
}

std::unique_ptr<CudaBackend> MakeBackend(int block_size, int num_kv_blocks, int slots, int chunk = 2048) {
  BackendOptions o;
  o.backend = "cuda";
  o.model_dir = FortunesDir();
  o.max_slots = slots;
  o.max_context = 512;
  o.kv_block_size = block_size;
  o.num_kv_blocks = num_kv_blocks;
  CudaTuning t;
  t.max_chunk_tokens = chunk;
  t.exact_embed_scale = true;
  t.autotune_gemv = false;  // one GEMV tiling for both backends: only the addressing differs
  auto b = CreateCudaBackendWithTuning(o, t);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

// One sequence's block tables the way KvBlockManager keeps them, with
// scrambled block ids drawn from `pool` (global and sliding ids differ).
struct Tables {
  std::vector<int32_t> global, sliding;
  void Cover(int end, std::vector<int32_t>& global_pool, std::vector<int32_t>& sliding_pool) {
    while (static_cast<int>(global.size()) * kBlock < end) {
      global.push_back(global_pool.back());
      global_pool.pop_back();
      sliding.push_back(sliding_pool.back());
      sliding_pool.pop_back();
    }
  }
  // Releases sliding blocks no query at or after `position` reads.
  void Release(int position, int window, std::vector<int32_t>& sliding_pool) {
    const int first_live = std::max(0, position - window + 1) / kBlock;
    for (int b = 0; b < first_live; ++b) {
      if (sliding[b] >= 0) sliding_pool.insert(sliding_pool.begin(), sliding[b]);
      sliding[b] = -1;
    }
  }
};

std::vector<int32_t> RandomIds(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = 3 + static_cast<int32_t>(rng() % (vocab - 3));
  return ids;
}

TEST(PagedKvCache, ScrambledBlockTablesGiveTheBlockManagersLogits) {
  GEMMA_REQUIRE_GPU();
  auto in_order = MakeBackend(kBlock, 64, 2, /*chunk=*/48);
  auto paged = MakeBackend(kBlock, 64, 2, /*chunk=*/48);
  ASSERT_TRUE(in_order && paged);
  auto manager_tables = SlotTables::For(*in_order);
  ASSERT_TRUE(manager_tables.ok()) << manager_tables.status();
  ASSERT_EQ(paged->kv_cache_spec().block_size, kBlock);
  ASSERT_EQ(paged->kv_cache_spec().num_global_blocks, 64);
  const int vocab = paged->config().vocab_size;
  const int window = paged->config().sliding_window;
  std::vector<int32_t> global_pool(64), sliding_pool(paged->kv_cache_spec().num_sliding_blocks);
  std::iota(global_pool.begin(), global_pool.end(), 0);
  std::iota(sliding_pool.begin(), sliding_pool.end(), 0);
  std::shuffle(global_pool.begin(), global_pool.end(), std::mt19937(7));
  std::shuffle(sliding_pool.begin(), sliding_pool.end(), std::mt19937(8));

  // Two sequences, prefilled in uneven chunks (passes of 48 tokens cut them
  // further), then decoded together well past the window (64).
  const std::vector<int32_t> a = RandomIds(150, vocab, 1), b = RandomIds(37, vocab, 2);
  std::vector<Tables> tables(2);
  std::vector<int> length = {0, 0};
  double worst = 0;
  auto step = [&](const std::vector<std::vector<int32_t>>& pieces) {
    std::vector<SequenceChunk> in_order_chunks, paged_chunks;
    for (int s = 0; s < 2; ++s) {
      if (pieces[s].empty()) continue;
      SequenceChunk c{s, pieces[s], length[s], true};
      in_order_chunks.push_back(c);
      const int end = length[s] + static_cast<int>(pieces[s].size());
      tables[s].Release(length[s], window, sliding_pool);
      tables[s].Cover(end, global_pool, sliding_pool);
      c.global_blocks = tables[s].global;
      c.sliding_blocks = tables[s].sliding;
      paged_chunks.push_back(c);
    }
    ForwardResult want, got;
    ASSERT_TRUE(manager_tables->Forward(*in_order, in_order_chunks, {}, &want).ok());
    const absl::Status st = paged->Forward(paged_chunks, {}, &got);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_EQ(want.logits.size(), got.logits.size());
    for (size_t r = 0; r < want.logits.size() / vocab; ++r)
      worst = std::max(worst, gpu_test::RelErrPtr(got.logits.data() + r * vocab, want.logits.data() + r * vocab, vocab));
    for (int s = 0; s < 2; ++s) length[s] += static_cast<int>(pieces[s].size());
  };
  step({{a.begin(), a.begin() + 70}, {b.begin(), b.end()}});
  step({{a.begin() + 70, a.end()}, {}});
  for (int i = 0; i < 90; ++i) step({{a[i % 150]}, {b[i % 37]}});
  std::printf("scrambled vs block manager's tables: worst row relative error %.3g\n", worst);
  EXPECT_LT(worst, 1e-5);
  // Bad tables are refused by name, not read.
  std::vector<int32_t> one = {5};
  SequenceChunk bad{0, one, length[0], false};
  bad.global_blocks = std::span<const int32_t>(tables[0].global).first(1);
  bad.sliding_blocks = tables[0].sliding;
  ForwardResult out;
  const absl::Status st = paged->Forward({&bad, 1}, {}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("global table has 1 blocks"), std::string::npos) << st;
}

using Runner = testing::RequestRunner;

class PagedEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    GEMMA_REQUIRE_GPU();
    golden_ = gpu_test::LoadGolden(FortunesDir());
    ASSERT_FALSE(golden_.empty()) << FortunesDir();
    auto tok = Tokenizer::Load(FortunesDir() + "/tokenizer.model");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
  }
  std::unique_ptr<Engine> MakeEngine(int num_kv_blocks) {
    auto backend = MakeBackend(kBlock, num_kv_blocks, 4);
    EngineOptions eo;
    eo.max_tokens_per_step = 32;  // prompts in several chunks, mixed with decodes
    auto engine = Engine::Create(eo, std::move(backend), tokenizer_.get());
    EXPECT_TRUE(engine.ok()) << engine.status();
    return std::move(*engine);
  }
  GenerationRequest Request(const gpu_test::GoldenPrompt& g) const {
    GenerationRequest r;
    r.prompt_ids = g.ids;
    r.sampling.temperature = 0.0f;
    r.stopping.max_tokens = static_cast<int>(g.greedy.size());
    r.stopping.ignore_eos = true;
    return r;
  }
  // Tokens must equal the golden greedy ones up to the first low-margin step.
  void ExpectGolden(const std::vector<int32_t>& got, const gpu_test::GoldenPrompt& g, const std::string& what) {
    ASSERT_EQ(got.size(), g.greedy.size()) << what;
    for (size_t s = 0; s < g.greedy.size() && g.margins[s] >= kMarginFloor; ++s)
      ASSERT_EQ(got[s], g.greedy[s]) << what << " step " << s;
  }
  static void ExpectAllBlocksFree(Engine& engine) {
    for (int i = 0; i < 400; ++i) {
      const EngineStats s = engine.Stats();
      if (s.running == 0 && s.waiting == 0 && s.kv_free_blocks == s.kv_total_blocks) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(engine.Stats().kv_free_blocks, engine.Stats().kv_total_blocks);
  }

  std::vector<gpu_test::GoldenPrompt> golden_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(PagedEngine, BatchedAndPreemptedRequestsMatchGolden) {
  for (int blocks : {0, 7}) {  // memory-sized pool; 7 blocks: 3 x ~4 blocks must preempt
    SCOPED_TRACE("num_kv_blocks " + std::to_string(blocks));
    auto engine = MakeEngine(blocks);
    ASSERT_TRUE(engine);
    Runner r(engine.get());
    for (int copy = 0; copy < 2; ++copy)
      for (const auto& g : golden_) r.Submit(Request(g));
    const auto got = r.Wait();
    for (size_t i = 0; i < got.size(); ++i)
      ExpectGolden(got[i].ids, golden_[i % golden_.size()], "request " + std::to_string(i));
    if (blocks > 0) EXPECT_GT(engine->Stats().preemptions, 0);
    ExpectAllBlocksFree(*engine);
  }
}

TEST_F(PagedEngine, PrefixCacheHitMatchesGolden) {
  auto engine = MakeEngine(0);
  ASSERT_TRUE(engine);
  const auto& g = golden_.back();  // the longest prompt
  Runner first(engine.get());
  first.Submit(Request(g));
  const auto cold = first.Wait()[0];
  ExpectGolden(cold.ids, g, "cold");
  Runner second(engine.get());
  second.Submit(Request(g));
  const auto warm = second.Wait()[0];
  ExpectGolden(warm.ids, g, "warm");
  EXPECT_EQ(warm.last.usage.cached_tokens, (static_cast<int>(g.ids.size()) - 1) / kBlock * kBlock);
  EXPECT_GT(engine->Stats().prefix_cache_hits, 0);
  ExpectAllBlocksFree(*engine);
}

}  // namespace
}  // namespace gemma
