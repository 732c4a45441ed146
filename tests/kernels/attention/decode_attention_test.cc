// Decode (split-K) attention against a float64 host reference: the 31B
// shapes, split counts from one to more splits than tiles, window edges, ring
// wrap, length-unaware mode, and a captured graph replayed at other depths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/elementwise/elementwise.h"
#include "tests/kernels/attention/attention_case.h"

namespace gemma::kernels::testing {
namespace {

constexpr double kTolerance = 1e-2;

class DecodeAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  }

  void Check(const AttentionCase& c, std::initializer_list<int> splits, bool length_aware = true) {
    AttentionProblem prob(c);
    const std::vector<double> ref = prob.Reference();
    // Slot caches, then (length-aware only) the same keys through scrambled
    // paged blocks of 16.
    const AttentionParams paged = length_aware ? prob.PagedParams(16) : AttentionParams{};
    for (int view = 0; view < (length_aware ? 2 : 1); ++view)
    for (int num_splits : splits) {
      SCOPED_TRACE("splits " + std::to_string(num_splits) +
                   (length_aware ? "" : " length-unaware") + (view ? " paged" : ""));
      DeviceBuffer ws(DecodeWorkspaceBytes(static_cast<int>(c.q_lens.size()), c.num_heads,
                                           c.head_dim, num_splits));
      CUDA_OK(prob.Poison());
      if (ws.bytes() > 0) CUDA_OK(cudaMemset(ws.as<void>(), 0xff, ws.bytes()));
      AttentionParams p = view ? paged : prob.Params();
      p.length_aware = length_aware;
      ASSERT_EQ(LaunchDecodeAttention(p, ws.as<void>(), num_splits, nullptr), "");
      CUDA_OK(cudaDeviceSynchronize());
      const ErrorReport r = Compare(prob.Output(), ref);
      EXPECT_EQ(r.num_not_finite, 0);
      EXPECT_LT(r.rel_error, kTolerance);
    }
  }
};

// The split count fills every block slot: one decode block per
// multiprocessor over a bf16 cache, the E4M3 builds' 2 (D = 512) or 3
// (D = 256); never below 1, above 64 per block slot or above 128 splits.
TEST(DecodeNumSplits, FillsTheBlockSlotsOfTheMultiprocessors) {
  EXPECT_EQ(DecodeBlocksPerSm(512, false), 1);
  EXPECT_EQ(DecodeBlocksPerSm(512, true), 2);
  EXPECT_EQ(DecodeBlocksPerSm(256, true), 3);
  EXPECT_EQ(DecodeBlocksPerSm(64, true), 1);
  EXPECT_EQ(DecodeNumSplits(1, 4, 132), 33);
  EXPECT_EQ(DecodeNumSplits(1, 4, 132, 2), 66);
  EXPECT_EQ(DecodeNumSplits(64, 4, 132, 2), 1);
  EXPECT_EQ(DecodeNumSplits(1, 1, 132, 4), 128);
  EXPECT_EQ(DecodeNumSplits(1, 1, 132), 64);
  EXPECT_EQ(DecodeNumSplits(1, 2, 132), 64);
}

// The keys-from-values tile build exists only in that form: a bf16 launch
// reading K whole has no build of it; the key-rows builds whose K stages
// fit their blocks reading K whole serve both ways, the two-block ones only
// keys from values; out of range serves nothing.
TEST(DecodeVariantServes, KeysFromValuesOnlyBuilds) {
  const std::vector<std::string> names = DecodeVariants(512, /*kv_fp8=*/false);
  const auto kfv = std::find(names.begin(), names.end(), "w4n32s2b2");
  ASSERT_NE(kfv, names.end());
  const int v = static_cast<int>(kfv - names.begin());
  EXPECT_TRUE(DecodeVariantServes(512, false, v, /*keys_from_values=*/true));
  EXPECT_FALSE(DecodeVariantServes(512, false, v, /*keys_from_values=*/false));
  EXPECT_EQ(DecodeVariantBlocksPerSm(512, false, v), 2);
  // Launched reading K whole, it is refused by name before anything reaches
  // a GPU (the pointers are never read).
  static char buf[64];
  static int ints[4] = {0, 1, 0, 0};
  AttentionParams p;
  p.q = reinterpret_cast<const __nv_bfloat16*>(buf);
  p.out = reinterpret_cast<__nv_bfloat16*>(buf);
  p.k_cache = p.v_cache = buf;
  p.num_slots = 1, p.capacity = 16, p.num_heads = 32, p.num_kv_heads = 4, p.head_dim = 512;
  p.num_seqs = 1, p.seq_slot = ints, p.q_offsets = ints, p.q_pos0 = ints, p.max_q_len = 1;
  EXPECT_NE(LaunchDecodeAttentionVariant(p, buf, 4, v, nullptr).find("w4n32s2b2 has no bf16-cache build"),
            std::string::npos);
  const auto kr = std::find(names.begin(), names.end(), "kr2-w4s3b1");
  ASSERT_NE(kr, names.end());
  EXPECT_TRUE(DecodeVariantServes(512, false, static_cast<int>(kr - names.begin()), false));
  EXPECT_TRUE(DecodeVariantServes(512, false, static_cast<int>(kr - names.begin()), true));
  const auto kr_kfv = std::find(names.begin(), names.end(), "kr2-w4s2b2");
  ASSERT_NE(kr_kfv, names.end());
  EXPECT_TRUE(DecodeVariantServes(512, false, static_cast<int>(kr_kfv - names.begin()), true));
  EXPECT_FALSE(DecodeVariantServes(512, false, static_cast<int>(kr_kfv - names.begin()), false));
  EXPECT_EQ(DecodeVariantBlocksPerSm(512, false, static_cast<int>(kr_kfv - names.begin())), 2);
  EXPECT_FALSE(DecodeVariantServes(512, false, static_cast<int>(names.size()), false));
  EXPECT_TRUE(DecodeVariantServes(512, true, 0, false));
  EXPECT_EQ(DecodeBlocksPerSm(512, false, /*keys_from_values=*/true), 2);
  EXPECT_EQ(DecodeBlocksPerSm(256, false, /*keys_from_values=*/true), 1);  // no such build at 256
}

TEST_F(DecodeAttentionTest, Global31BGqa8) {
  AttentionCase c = DecodeCase(512, 32, 4, {1, 777, 2000}, {1, 2, 0});
  c.capacity = 2048;
  Check(c, {1, 7, 33, 64});
}

TEST_F(DecodeAttentionTest, Sliding31BWindowRing) {
  AttentionCase c = DecodeCase(256, 32, 16, {1030, 1024, 1025, 500, 3001}, {4, 0, 3, 1, 2});
  c.window = 1024;
  c.capacity = 1024;
  c.ring = true;
  c.seed = 2;
  Check(c, {1, 9, 16});
}

// The alternative bf16-cache decode builds (benchmarks choose among them)
// against the float64 reference: global and sliding-ring 31B shapes, slot
// and paged caches, one and several splits.
TEST_F(DecodeAttentionTest, AlternativeBuilds) {
  AttentionCase global = DecodeCase(512, 32, 4, {1, 777, 2000}, {1, 2, 0});
  global.capacity = 2048;
  AttentionCase sliding = DecodeCase(256, 32, 16, {1030, 1024, 1025, 500, 3001}, {4, 0, 3, 1, 2});
  sliding.window = 1024;
  sliding.capacity = 1024;
  sliding.ring = true;
  sliding.seed = 2;
  for (const AttentionCase& c : {global, sliding}) {
    const std::vector<std::string> variants = DecodeVariants(c.head_dim, /*kv_fp8=*/false);
    ASSERT_FALSE(variants.empty()) << "head_dim " << c.head_dim;
    AttentionProblem prob(c);
    const std::vector<double> ref = prob.Reference();
    for (int v = 0; v < static_cast<int>(variants.size()); ++v) {
      // Builds of keys from values only (their K stages hold the rotated
      // dims) are run by KeysFromValues* below.
      if (!DecodeVariantServes(c.head_dim, /*kv_fp8=*/false, v, /*keys_from_values=*/false)) continue;
      for (int view = 0; view < 2; ++view) {
        for (int num_splits : {1, 9}) {
          SCOPED_TRACE(variants[static_cast<size_t>(v)] + " splits " + std::to_string(num_splits) +
                       (view ? " paged" : ""));
          DeviceBuffer ws(DecodeWorkspaceBytes(static_cast<int>(c.q_lens.size()), c.num_heads, c.head_dim, num_splits));
          CUDA_OK(prob.Poison());
          if (ws.bytes() > 0) CUDA_OK(cudaMemset(ws.as<void>(), 0xff, ws.bytes()));
          const AttentionParams p = view ? prob.PagedParams(16) : prob.Params();
          ASSERT_EQ(LaunchDecodeAttentionVariant(p, ws.as<void>(), num_splits, v, nullptr), "");
          CUDA_OK(cudaDeviceSynchronize());
          const ErrorReport r = Compare(prob.Output(), ref);
          EXPECT_EQ(r.num_not_finite, 0);
          EXPECT_LT(r.rel_error, kTolerance);
        }
      }
    }
  }
  EXPECT_TRUE(DecodeVariants(128, false).empty());
}

// Keys from values (global layers whose V is K before its norm weight and
// RoPE): with K's unrotated dims NaN in the cache, the decode still matches
// the float64 reference of the whole K (it read only K's rotated dims and
// V), while the same launch reading K whole turns NaN: head_dim 512 (the
// 31B) with 64 rotated pairs and none, GQA groups of 8 (the 31B) and 4, slot
// and paged caches, one and several splits. Rotated pairs above the build's
// 64, head_dims without such a build (256, the fortunes fixture's 128) and
// GQA groups above 8 (the builds put the second bf16 terms of w * Q in the
// m16 tile's rows 8-15) read K whole.
TEST_F(DecodeAttentionTest, KeysFromValuesReadOnlyTheRotatedKeyDims) {
  struct Shape {
    int d, heads, kv, pairs;
  };
  for (const Shape& sh : {Shape{512, 32, 4, 64}, Shape{512, 32, 8, 64}, Shape{512, 32, 2, 64}, Shape{512, 32, 4, 0},
                          Shape{512, 32, 4, 256},
                          Shape{256, 16, 2, 32}, Shape{128, 8, 1, 16}, Shape{64, 8, 2, 8}}) {
    AttentionCase c = DecodeCase(sh.d, sh.heads, sh.kv, {1, 777, 2000}, {1, 2, 0});
    c.capacity = 2048;
    c.keys_from_values_pairs = sh.pairs;
    c.seed = 20 + sh.d + sh.pairs;
    AttentionProblem prob(c);
    const std::vector<double> ref = prob.Reference();
    const bool has_build = sh.d == 512 && sh.pairs <= 64 && sh.heads <= 8 * sh.kv;
    for (int view = 0; view < 2; ++view) {
      for (int num_splits : {1, 7, 66}) {
        SCOPED_TRACE("head_dim " + std::to_string(sh.d) + " pairs " + std::to_string(sh.pairs) + " splits " +
                     std::to_string(num_splits) + (view ? " paged" : ""));
        DeviceBuffer ws(DecodeWorkspaceBytes(static_cast<int>(c.q_lens.size()), c.num_heads, c.head_dim, num_splits));
        const AttentionParams base = view ? prob.PagedParams(16) : prob.Params();
        for (bool poisoned : {false, true}) {
          AttentionParams p = prob.KeysFromValues(base, poisoned);
          CUDA_OK(prob.Poison());
          ASSERT_EQ(LaunchDecodeAttention(p, ws.as<void>(), num_splits, nullptr), "");
          CUDA_OK(cudaDeviceSynchronize());
          const ErrorReport r = Compare(prob.Output(), ref);
          if (has_build || !poisoned || sh.pairs == sh.d / 2) {
            EXPECT_EQ(r.num_not_finite, 0) << (poisoned ? "poisoned K" : "");
            EXPECT_LT(r.rel_error, kTolerance);
          } else {
            EXPECT_GT(r.num_not_finite, 0) << "head_dim " << sh.d << " has no keys-from-values build";
          }
          if (!poisoned) {
            AttentionParams whole = p;
            whole.keys_from_values = nullptr;
            CUDA_OK(prob.Poison());
            ASSERT_EQ(LaunchDecodeAttention(whole, ws.as<void>(), num_splits, nullptr), "");
            CUDA_OK(cudaDeviceSynchronize());
            const ErrorReport w = Compare(prob.Output(), ref);
            // Keys from values is as close to the math (keys w * V) as K
            // read whole, which holds their bf16 rounding.
            EXPECT_LE(r.rel_error, w.rel_error * 1.25 + 1e-5) << "K whole: " << w.rel_error;
            std::printf("keys from values: head_dim %d pairs %d splits %d: error %.3g, K whole %.3g\n", sh.d,
                        sh.pairs, num_splits, r.rel_error, w.rel_error);
            continue;
          }
          p.keys_from_values = nullptr;  // K whole: the poison shows
          CUDA_OK(prob.Poison());
          ASSERT_EQ(LaunchDecodeAttention(p, ws.as<void>(), num_splits, nullptr), "");
          CUDA_OK(cudaDeviceSynchronize());
          if (sh.pairs < sh.d / 2) EXPECT_GT(Compare(prob.Output(), ref).num_not_finite, 0);
        }
      }
    }
  }
}

// Every alternative bf16 build with a keys-from-values launch (the
// key-rows builds at head_dim 512): K's unrotated dims NaN in the cache,
// slot and paged caches, one and several splits, against the float64
// reference, as close to it as the default launch reading K whole.
TEST_F(DecodeAttentionTest, KeysFromValuesAlternativeBuilds) {
  AttentionCase c = DecodeCase(512, 32, 4, {1, 777, 2000}, {1, 2, 0});
  c.capacity = 2048;
  c.keys_from_values_pairs = 64;
  c.seed = 91;
  AttentionProblem prob(c);
  const std::vector<double> ref = prob.Reference();
  const std::vector<std::string> variants = DecodeVariants(512, /*kv_fp8=*/false);
  int served = 0;
  for (int v = 0; v < static_cast<int>(variants.size()); ++v) {
    if (!DecodeVariantServes(512, /*kv_fp8=*/false, v, /*keys_from_values=*/true)) continue;
    ++served;
    for (int view = 0; view < 2; ++view) {
      for (int num_splits : {1, 9, 66}) {
        SCOPED_TRACE(variants[static_cast<size_t>(v)] + " splits " + std::to_string(num_splits) +
                     (view ? " paged" : ""));
        DeviceBuffer ws(DecodeWorkspaceBytes(static_cast<int>(c.q_lens.size()), c.num_heads, c.head_dim, num_splits));
        const AttentionParams base = view ? prob.PagedParams(16) : prob.Params();
        AttentionParams whole = prob.KeysFromValues(base, /*poison_unrotated_keys=*/false);
        whole.keys_from_values = nullptr;
        CUDA_OK(prob.Poison());
        ASSERT_EQ(LaunchDecodeAttention(whole, ws.as<void>(), num_splits, nullptr), "");
        CUDA_OK(cudaDeviceSynchronize());
        const ErrorReport w = Compare(prob.Output(), ref);
        const AttentionParams p = prob.KeysFromValues(base, /*poison_unrotated_keys=*/true);
        CUDA_OK(prob.Poison());
        if (ws.bytes() > 0) CUDA_OK(cudaMemset(ws.as<void>(), 0xff, ws.bytes()));
        ASSERT_EQ(LaunchDecodeAttentionVariant(p, ws.as<void>(), num_splits, v, nullptr), "");
        CUDA_OK(cudaDeviceSynchronize());
        const ErrorReport r = Compare(prob.Output(), ref);
        EXPECT_EQ(r.num_not_finite, 0);
        EXPECT_LT(r.rel_error, kTolerance);
        EXPECT_LE(r.rel_error, w.rel_error * 1.25 + 1e-5) << "K whole: " << w.rel_error;
      }
    }
  }
  EXPECT_EQ(served, static_cast<int>(variants.size())) << "every bf16 build at head_dim 512 reads keys from values";
}

TEST_F(DecodeAttentionTest, WindowBoundary15_16_17) {
  AttentionCase c = DecodeCase(64, 8, 2, {15, 16, 17, 41}, {2, 3, 0, 1});
  c.window = 16;
  c.capacity = 16;
  c.ring = true;
  c.seed = 3;
  Check(c, {1, 2, 5});
}

TEST_F(DecodeAttentionTest, FixtureHeadDims) {
  for (int d : {32, 64, 128}) {
    for (int kv : {1, 2, 4}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + " kv heads " + std::to_string(kv));
      AttentionCase c = DecodeCase(d, 4, kv, {1, 33, 300}, {2, 0, 1});
      c.capacity = 320;
      c.seed = 10 + d + kv;
      Check(c, {1, 4});
    }
  }
}

TEST_F(DecodeAttentionTest, LengthUnawareSweepsCapacityAndIgnoresGarbage) {
  AttentionCase c = DecodeCase(512, 32, 4, {1, 300, 1000}, {0, 2, 1});
  c.capacity = 1100;
  c.poison_unused_cache = true;  // NaN rows past each length
  c.seed = 4;
  Check(c, {1, 16}, /*length_aware=*/false);
  Check(c, {16}, /*length_aware=*/true);

  AttentionCase r = DecodeCase(256, 32, 16, {5, 1500}, {1, 0});
  r.window = 1024;
  r.capacity = 1100;
  r.ring = true;
  r.poison_unused_cache = true;
  r.seed = 5;
  Check(r, {1, 8}, /*length_aware=*/false);
}

TEST_F(DecodeAttentionTest, GraphReplaysAtAnyDepth) {
  AttentionCase c = DecodeCase(512, 32, 4, {10, 20}, {1, 0});
  c.capacity = 4096;
  AttentionProblem prob(c);
  const int splits = 32;
  DeviceBuffer ws(DecodeWorkspaceBytes(2, 32, 512, splits));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const std::string err = LaunchDecodeAttention(prob.Params(), ws.as<void>(), splits, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_EQ(err, "");
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (const std::vector<int>& pos : {std::vector<int>{9, 19}, {4095, 100}, {0, 2500}}) {
    SCOPED_TRACE("positions " + std::to_string(pos[0]) + ", " + std::to_string(pos[1]));
    CUDA_OK(prob.SetPositions(pos));
    CUDA_OK(prob.Poison());
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    const ErrorReport r = Compare(prob.Output(), prob.Reference());
    EXPECT_EQ(r.num_not_finite, 0);
    EXPECT_LT(r.rel_error, kTolerance);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Decode attention is launched with PDL after QKV-RoPE, which writes Q and
// each sequence's newest K / V row: those it must read only after its wait
// (the older rows it may load before). Here the kernel before it lets it
// launch at once and writes them 200 us later, over NaN: bf16 and E4M3
// caches, a new row at position 32 (a 32-key tile's first), one inside a
// tile and one past a ring's wrap. Each build runs once first, so its
// set-up and module load are done before the timed launch.
TEST_F(DecodeAttentionTest, ReadsThisStepsRowsOnlyAfterThePreviousKernel) {
  AttentionCase c = DecodeCase(256, 32, 16, {33, 1030, 500}, {2, 0, 1});
  c.window = 1024;
  c.capacity = 1024;
  c.ring = true;
  c.e4m3_values = true;
  c.seed = 9;
  AttentionProblem prob(c);
  const std::vector<double> ref = prob.Reference();
  const int seqs = static_cast<int>(c.q_lens.size());
  const size_t row_elems = static_cast<size_t>(c.num_kv_heads) * c.head_dim;
  const size_t q_bytes = static_cast<size_t>(prob.num_tokens()) * c.num_heads * c.head_dim * 2;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  AttentionParams bf16 = prob.Params();
  for (const AttentionParams& p : {bf16, prob.Fp8(bf16)}) {
    const size_t elem = p.kv_fp8 ? 1 : 2;
    for (int num_splits : {1, 16}) {
      SCOPED_TRACE(std::string(p.kv_fp8 ? "E4M3" : "bf16") + " cache, splits " + std::to_string(num_splits));
      DeviceBuffer ws(DecodeWorkspaceBytes(seqs, c.num_heads, c.head_dim, num_splits));
      DeviceBuffer saved(q_bytes + 2 * seqs * row_elems * elem);
      ASSERT_EQ(LaunchDecodeAttention(p, ws.as<void>(), num_splits, stream), "");  // warm-up
      CUDA_OK(cudaStreamSynchronize(stream));
      LateCopyParams late;
      late.delay_ns = 200'000;
      auto hide = [&](void* at, size_t bytes, size_t saved_at) {
        CUDA_OK(cudaMemcpy(saved.as<uint8_t>() + saved_at, at, bytes, cudaMemcpyDeviceToDevice));
        CUDA_OK(cudaMemset(at, 0xff, bytes));  // NaN in bf16 and in E4M3
        late.copies[late.count++] = {at, saved.as<uint8_t>() + saved_at, bytes};
      };
      hide(const_cast<__nv_bfloat16*>(p.q), q_bytes, 0);
      for (int i = 0; i < seqs; ++i) {
        const size_t row = prob.NewestRow(i) * elem, bytes = row_elems * elem;
        hide(static_cast<uint8_t*>(const_cast<void*>(p.k_cache)) + row, bytes, q_bytes + (2 * i) * bytes);
        hide(static_cast<uint8_t*>(const_cast<void*>(p.v_cache)) + row, bytes, q_bytes + (2 * i + 1) * bytes);
      }
      CUDA_OK(prob.Poison());
      ASSERT_EQ(LaunchLateCopy(late, stream), "");
      ASSERT_EQ(LaunchDecodeAttention(p, ws.as<void>(), num_splits, stream), "");
      CUDA_OK(cudaStreamSynchronize(stream));
      const ErrorReport r = Compare(prob.Output(), ref);
      EXPECT_EQ(r.num_not_finite, 0);
      EXPECT_LT(r.rel_error, kTolerance);
    }
  }
  cudaStreamDestroy(stream);
}

TEST_F(DecodeAttentionTest, RejectsBadParams) {
  AttentionCase c = DecodeCase(512, 32, 4, {10}, {0});
  c.capacity = 16;
  AttentionProblem prob(c);
  AttentionParams p = prob.Params();
  EXPECT_NE(LaunchDecodeAttention(p, nullptr, 4, nullptr).find("workspace"), std::string::npos);
  EXPECT_NE(LaunchDecodeAttention(p, nullptr, 0, nullptr), "");
  p.max_q_len = 2;
  EXPECT_NE(LaunchDecodeAttention(p, nullptr, 1, nullptr).find("q_len"), std::string::npos);
  p = prob.Params();
  p.num_kv_heads = 1;  // group 32 > 16
  EXPECT_NE(LaunchDecodeAttention(p, nullptr, 1, nullptr), "");
  p = prob.Params();
  const float weight = 1.0f;
  p.keys_from_values = &weight;  // never read: refused first
  p.rope_pairs = 257;
  EXPECT_NE(LaunchDecodeAttention(p, nullptr, 1, nullptr).find("rope_pairs in [0, head_dim / 2 = 256], got 257"),
            std::string::npos);
}

}  // namespace
}  // namespace gemma::kernels::testing
