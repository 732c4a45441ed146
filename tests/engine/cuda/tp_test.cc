// The tensor-parallel CUDA backend on whatever GPUs are visible (and, opt-in,
// 2 and 4 ranks sharing GPU 0: a thread each, the one-shot all-reduce between them) on the
// fortunes fixture, against its float64 golden (3e-2 relative row error: the
// one-GPU backend's 2e-2 of tests/engine/cuda/backend_parity_test.cc plus the
// all-reduce's rounding, see kRowTol) and against the one-GPU backend itself: prefill logits, step logits while the
// golden tokens are fed back, and greedy tokens from the decode graphs (the
// all-reduces captured inside). With 2 GPUs, the same on GPUs 0 and 1 (NCCL
// for large messages when libnccl.so.2 loads).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/tp/tensor_parallel_backend.h"
#include "tests/common/gpu_test_util.h"
#include "tests/engine/cuda/golden.h"

namespace gemma {
namespace {

// Ranks sharing a GPU need every kernel loaded before any rank's all-reduce
// waits (tensor_parallel_backend.cc); set before the first CUDA call.
const bool kEagerLoading = setenv("CUDA_MODULE_LOADING", "EAGER", 1) == 0;

// The one-GPU backend's bound (2e-2) plus room for the all-reduce: each
// rank's partial of o_proj / down_proj is rounded to bf16 before the sum, one
// rounding more than TP=1 makes (measured at TP=2 with both ranks on one
// H200: 0.0211 against the golden, 0.0239 against TP=1).
constexpr double kRowTol = 3e-2;
constexpr double kMarginFloor = 0.1;

std::string FortunesDir() {
  const char* v = std::getenv("GEMMA_MODELS_DIR");
  return std::string(v && *v ? v : GEMMA_MODELS_DIR) + "/gemma4-fortunes";
}

constexpr int kSlots = 4, kContext = 512, kBlock = 16, kBlocksPerSlot = kContext / kBlock;

// Paged, with a fixed global pool (ranks sharing a GPU cannot size theirs
// from free memory); each sequence gets a fixed run of blocks.
BackendOptions Options() {
  BackendOptions o;
  o.backend = "cuda";
  o.model_dir = FortunesDir();
  o.max_slots = kSlots;
  o.max_context = kContext;
  o.kv_block_size = kBlock;
  o.num_kv_blocks = kSlots * kBlocksPerSlot;
  // Every slot's whole prompt in one pass: the sliding pool (sized for the
  // windows plus one step's tokens) then holds the fixed runs BlocksOf gives
  // each slot, which reuse the global block numbers.
  o.max_tokens_per_step = kSlots * kContext;
  return o;
}

std::vector<int32_t> BlocksOf(int slot) {
  std::vector<int32_t> b;
  for (int i = 0; i < kBlocksPerSlot; ++i) b.push_back(slot * kBlocksPerSlot + i);
  return b;
}

SequenceChunk Chunk(int slot, std::span<const int32_t> ids, int32_t start, const std::vector<int32_t>& blocks) {
  SequenceChunk c;
  c.slot = slot;
  c.token_ids = ids;
  c.start_position = start;
  c.global_blocks = c.sliding_blocks = blocks;
  return c;
}

CudaTuning Tuning() {
  CudaTuning t;
  t.exact_embed_scale = true;  // as the float64 golden
  t.autotune_gemv = false;     // the same kernels on every backend
  return t;
}

std::unique_ptr<Backend> MakeTp(std::vector<int> devices) {
  BackendOptions o = Options();
  o.tensor_parallel_size = static_cast<int>(devices.size());
  TensorParallelCudaOptions tp;
  tp.devices = std::move(devices);
  auto b = CreateTensorParallelCudaBackend(o, Tuning(), tp);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

std::unique_ptr<Backend> MakeOne() {
  auto b = CreateCudaBackendWithTuning(Options(), Tuning());
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::unique_ptr<Backend>(std::move(*b)) : nullptr;
}

int Argmax(const float* row, int vocab) { return int(std::max_element(row, row + vocab) - row); }

// Sequence 0's blocks: prefill, then the golden tokens one step at a time.
// Returns the worst row error against the golden and against `one`.
std::pair<double, double> CheckLogits(Backend& tp, Backend& one, const std::vector<gpu_test::GoldenPrompt>& golden) {
  const int vocab = tp.config().vocab_size;
  double worst_golden = 0, worst_one = 0;
  for (size_t p = 0; p < golden.size(); ++p) {
    const auto& g = golden[p];
    const std::vector<int32_t> blocks = BlocksOf(0);
    SequenceChunk c = Chunk(0, g.ids, 0, blocks);
    c.all_logits = true;
    ForwardResult a, b;
    EXPECT_TRUE(tp.Forward({&c, 1}, {}, &a).ok());
    EXPECT_TRUE(one.Forward({&c, 1}, {}, &b).ok());
    if (a.logits.size() != g.prefill_logits.size()) {
      ADD_FAILURE() << "prompt " << p << ": " << a.logits.size() << " logits";
      return {INFINITY, INFINITY};
    }
    for (size_t t = 0; t < g.ids.size(); ++t) {
      const float* row = a.logits.data() + t * vocab;
      worst_golden = std::max(worst_golden, gpu_test::RelErrPtr(row, g.prefill_logits.data() + t * vocab, vocab));
      worst_one = std::max(worst_one, gpu_test::RelErrPtr(row, b.logits.data() + t * vocab, vocab));
    }
    for (size_t s = 0; s + 1 < g.greedy.size(); ++s) {
      SequenceChunk d = Chunk(0, {&g.greedy[s], 1}, int32_t(g.ids.size() + s), blocks);
      d.return_logits = true;
      EXPECT_TRUE(tp.Forward({&d, 1}, {}, &a).ok());
      EXPECT_TRUE(one.Forward({&d, 1}, {}, &b).ok());
      worst_golden =
          std::max(worst_golden, gpu_test::RelErrPtr(a.logits.data(), g.step_logits.data() + (s + 1) * vocab, vocab));
      worst_one = std::max(worst_one, gpu_test::RelErrPtr(a.logits.data(), b.logits.data(), vocab));
      if (g.margins[s + 1] >= kMarginFloor)
        EXPECT_EQ(Argmax(a.logits.data(), vocab), g.greedy[s + 1]) << "prompt " << p << " step " << s + 1;
    }
  }
  return {worst_golden, worst_one};
}

// Greedy ids from the device argmax, decode steps replaying the graphs; the
// prompts together in one batch.
std::vector<std::vector<int32_t>> Generate(Backend& b, const std::vector<gpu_test::GoldenPrompt>& golden, int n) {
  const int count = std::min<int>(golden.size(), b.max_slots());
  std::vector<std::vector<int32_t>> tables(count);
  std::vector<SequenceChunk> chunks;
  for (int p = 0; p < count; ++p) {
    tables[p] = BlocksOf(p);
    chunks.push_back(Chunk(p, golden[p].ids, 0, tables[p]));
  }
  std::vector<std::vector<int32_t>> gen(count);
  ForwardResult next;
  const absl::Status prefill = b.Forward(chunks, {}, &next);
  EXPECT_TRUE(prefill.ok()) << prefill;
  if (!prefill.ok()) return gen;
  for (int s = 0; s < n; ++s) {
    for (int i = 0; i < count; ++i) {
      gen[i].push_back(next.next_ids[i]);
      chunks[i].start_position += int(chunks[i].token_ids.size());
      chunks[i].token_ids = {&gen[i].back(), 1};
    }
    if (s + 1 < n) {
      const absl::Status step = b.Forward(chunks, {}, &next);
      EXPECT_TRUE(step.ok()) << step;
      if (!step.ok()) return gen;
    }
  }
  return gen;
}

void CheckRanks(const std::vector<int>& devices) {
  const auto golden = gpu_test::LoadGolden(FortunesDir());
  ASSERT_FALSE(golden.empty());
  const std::string tag = "TP=" + std::to_string(devices.size());
  std::printf("%s: creating\n", tag.c_str());
  std::fflush(stdout);
  auto tp = MakeTp(devices);
  auto one = MakeOne();
  ASSERT_TRUE(tp && one);
  const auto [vs_golden, vs_one] = CheckLogits(*tp, *one, golden);
  std::printf("%s: worst row error vs golden %.4f, vs TP=1 %.4f\n", tag.c_str(), vs_golden, vs_one);
  EXPECT_LT(vs_golden, kRowTol) << tag;
  EXPECT_LT(vs_one, kRowTol) << tag;
  std::fflush(stdout);
  const auto tokens = Generate(*tp, golden, 24);
  std::printf("%s: generated\n", tag.c_str());
  for (size_t p = 0; p < tokens.size(); ++p) {
    size_t trusted = 0;
    while (trusted < golden[p].greedy.size() && trusted < tokens[p].size() && golden[p].margins[trusted] >= kMarginFloor)
      ++trusted;
    EXPECT_EQ(std::vector<int32_t>(tokens[p].begin(), tokens[p].begin() + trusted),
              std::vector<int32_t>(golden[p].greedy.begin(), golden[p].greedy.begin() + trusted))
        << tag << " decode graphs: prompt " << p;
  }
}

// Opt-in: ranks sharing one GPU can deadlock there (each rank's all-reduce
// spins on multiprocessors that the other rank's kernels need before they
// reach theirs). On the H200 this test hung, once after the TP=2 logits
// check and once while creating the TP=2 backend; GPUs of their own do not
// share multiprocessors.
TEST(TensorParallelCuda, RanksSharingOneGpuMatchGoldenAndOneGpu) {
  GEMMA_REQUIRE_GPU();
  const char* opt_in = std::getenv("GEMMA_TP_SHARED_GPU");
  if (opt_in == nullptr || std::string(opt_in) != "1")
    GTEST_SKIP() << "ranks sharing one GPU can deadlock on its multiprocessors; GEMMA_TP_SHARED_GPU=1 runs it";
  ASSERT_TRUE(kEagerLoading);
  CheckRanks({0, 0});
  CheckRanks({0, 0, 0, 0});
}

TEST(TensorParallelCuda, TwoGpusMatchGoldenAndOneGpu) {
  GEMMA_REQUIRE_GPU();
  int count = 0;
  cudaGetDeviceCount(&count);
  if (count < 2) GTEST_SKIP() << "needs 2 GPUs, " << count << " visible";
  CheckRanks({0, 1});
  if (count >= 4) CheckRanks({0, 1, 2, 3});
}

TEST(TensorParallelCuda, RefusesSharedGpuWithoutFixedPool) {
  GEMMA_REQUIRE_GPU();
  BackendOptions o = Options();
  o.num_kv_blocks = 0;
  o.tensor_parallel_size = 2;
  TensorParallelCudaOptions tp;
  tp.devices = {0, 0};
  auto b = CreateTensorParallelCudaBackend(o, Tuning(), tp);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("need num_kv_blocks set"), std::string::npos) << b.status();
}

}  // namespace
}  // namespace gemma
