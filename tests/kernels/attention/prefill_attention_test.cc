// Prefill attention against a float64 host reference: every compiled tile
// configuration, the autotuned launch, the 31B shapes and the edges.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/attention/attention.h"
#include "tests/kernels/attention/attention_case.h"

namespace gemma::kernels::testing {
namespace {

constexpr double kTolerance = 1e-2;

class PrefillAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    // Keep the test's tuning out of the user's cache.
    setenv("GEMMA_AUTOTUNE_CACHE", "/tmp/gemma-attention-test-autotune.txt", 1);
  }

  // Runs every configuration of the head_dim and the autotuned launch.
  void CheckAllConfigs(const AttentionCase& c, bool length_aware = true) {
    AttentionProblem prob(c);
    const std::vector<double> ref = prob.Reference();
    std::vector<std::string> configs = PrefillAttentionConfigs(c.head_dim);
    ASSERT_FALSE(configs.empty());
    configs.push_back("default");
    configs.push_back("");  // "": LaunchPrefillAttention (autotunes on a miss)
    // Slot caches, then (length-aware only: a paged cache is never swept)
    // the same keys through scrambled paged blocks of 16.
    const AttentionParams paged = length_aware ? prob.PagedParams(16) : AttentionParams{};
    for (int view = 0; view < (length_aware ? 2 : 1); ++view)
    for (const std::string& name : configs) {
      SCOPED_TRACE("config " + (name.empty() ? std::string("autotuned") : name) + (view ? " paged" : ""));
      CUDA_OK(prob.Poison());
      AttentionParams p = view ? paged : prob.Params();
      p.length_aware = length_aware;
      const std::string err = name.empty() ? LaunchPrefillAttention(p, nullptr)
                                           : LaunchPrefillAttentionWithConfig(p, name, nullptr);
      ASSERT_EQ(err, "");
      CUDA_OK(cudaDeviceSynchronize());
      const ErrorReport r = Compare(prob.Output(), ref);
      EXPECT_EQ(r.num_not_finite, 0);
      EXPECT_LT(r.rel_error, kTolerance);
    }
  }
};

TEST_F(PrefillAttentionTest, Global31BGqa8NonMultipleOfBlock) {
  AttentionCase c{.head_dim = 512, .num_heads = 32, .num_kv_heads = 4, .capacity = 512};
  c.q_lens = {300};
  c.q_pos0 = {0};
  c.slots = {0};
  CheckAllConfigs(c);
}

TEST_F(PrefillAttentionTest, Global31BChunksOfSeveralSequences) {
  AttentionCase c{.head_dim = 512, .num_heads = 32, .num_kv_heads = 4, .capacity = 400,
                  .num_slots = 3};
  c.q_lens = {70, 1, 33};
  c.q_pos0 = {200, 0, 366};  // chunked prefill: earlier keys are in the cache
  c.slots = {2, 0, 1};
  c.seed = 2;
  CheckAllConfigs(c);
}

TEST_F(PrefillAttentionTest, Sliding31BWindowRing) {
  // Window 1024, chunk 200 past the window: ring wraps, keys 477..1499.
  AttentionCase c{.head_dim = 256, .num_heads = 32, .num_kv_heads = 16, .window = 1024,
                  .capacity = 1280, .num_slots = 2, .ring = true};
  c.q_lens = {200, 45};
  c.q_pos0 = {1300, 0};
  c.slots = {1, 0};
  c.seed = 3;
  CheckAllConfigs(c);
}

TEST_F(PrefillAttentionTest, WindowBoundary15_16_17) {
  // Window 16; sequences end at 15, 16, 17 tokens; one continues at 40 so the
  // ring (capacity 16 + 17 - 1) wraps.
  AttentionCase c{.head_dim = 128, .num_heads = 8, .num_kv_heads = 2, .window = 16,
                  .capacity = 32, .num_slots = 5, .ring = true};
  c.q_lens = {15, 16, 17, 9};
  c.q_pos0 = {0, 0, 0, 40};
  c.slots = {3, 0, 4, 1};
  c.seed = 4;
  CheckAllConfigs(c);
}

TEST_F(PrefillAttentionTest, LengthOne) {
  AttentionCase c{.head_dim = 256, .num_heads = 32, .num_kv_heads = 16, .capacity = 200,
                  .num_slots = 2};
  c.q_lens = {1, 1};
  c.q_pos0 = {0, 150};
  c.slots = {1, 0};
  c.seed = 5;
  CheckAllConfigs(c);
}

TEST_F(PrefillAttentionTest, FixtureHeadDims) {
  for (int d : {32, 64, 128}) {
    for (int kv : {1, 2, 4}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + " kv heads " + std::to_string(kv));
      AttentionCase c{.head_dim = d, .num_heads = 4, .num_kv_heads = kv, .capacity = 160,
                      .num_slots = 2};
      c.q_lens = {130, 17};
      c.q_pos0 = {0, 100};
      c.slots = {1, 0};
      c.seed = 10 + d + kv;
      CheckAllConfigs(c);
    }
  }
}

// D = 512 through the window and length-unaware paths (masks at key offsets
// inside a BN tile, zeroed V rows), for the configurations that split S's
// softmax over warps.
TEST_F(PrefillAttentionTest, Global512WindowAndLengthUnaware) {
  AttentionCase c{.head_dim = 512, .num_heads = 16, .num_kv_heads = 2, .window = 37,
                  .capacity = 320, .num_slots = 2};
  c.q_lens = {150, 45};
  c.q_pos0 = {0, 203};
  c.slots = {1, 0};
  c.poison_unused_cache = true;
  c.seed = 12;
  {
    SCOPED_TRACE("window, length-aware");
    CheckAllConfigs(c);
  }
  c.window = 0;  // unaware: every row is read, the NaN ones must be masked and zeroed
  SCOPED_TRACE("causal, length-unaware");
  CheckAllConfigs(c, false);
}

TEST_F(PrefillAttentionTest, UnusedCacheRowsNeverMatter) {
  AttentionCase c{.head_dim = 512, .num_heads = 32, .num_kv_heads = 4, .capacity = 256};
  c.q_lens = {77};
  c.q_pos0 = {50};
  c.slots = {0};
  c.poison_unused_cache = true;
  c.seed = 6;
  CheckAllConfigs(c);
}

TEST_F(PrefillAttentionTest, GraphCaptureUsesDefaultAndAutotuneRefuses) {
  AttentionCase c{.head_dim = 64, .num_heads = 4, .num_kv_heads = 2, .capacity = 3000};
  c.q_lens = {2999};  // a bucket no other test tunes
  c.q_pos0 = {0};
  c.slots = {0};
  AttentionProblem prob(c);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  CUDA_OK(prob.Poison());
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  EXPECT_NE(AutotunePrefillAttention(prob.Params(), stream), "");
  const std::string err = LaunchPrefillAttention(prob.Params(), stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_EQ(err, "");
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const ErrorReport r = Compare(prob.Output(), prob.Reference());
  EXPECT_EQ(r.num_not_finite, 0);
  EXPECT_LT(r.rel_error, kTolerance);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_F(PrefillAttentionTest, RejectsBadParams) {
  AttentionCase c{.head_dim = 64, .num_heads = 4, .num_kv_heads = 2, .capacity = 16};
  c.q_lens = {4};
  c.q_pos0 = {0};
  c.slots = {0};
  AttentionProblem prob(c);
  AttentionParams p = prob.Params();
  p.head_dim = 40;
  EXPECT_NE(LaunchPrefillAttention(p, nullptr).find("head_dim"), std::string::npos);
  p = prob.Params();
  p.num_kv_heads = 3;
  EXPECT_NE(LaunchPrefillAttention(p, nullptr), "");
  p = prob.Params();
  p.ring = true;
  p.window = 16;  // capacity 16 < 16 + 4 - 1
  EXPECT_NE(LaunchPrefillAttention(p, nullptr).find("ring capacity"), std::string::npos);
  p = prob.Params();
  EXPECT_NE(LaunchPrefillAttentionWithConfig(p, "m7n7", nullptr), "");
}

}  // namespace
}  // namespace gemma::kernels::testing
