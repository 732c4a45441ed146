// Head_dims without an instance of their own (multiples of 16: 16, 48, ...)
// run the next larger instance zero-padded: prefill and decode, bf16 and
// E4M3 caches, slot and paged views, split-K, sliding windows, against the
// float64 reference. Unused cache rows hold NaN, and every output element
// must be written (Poison) while the neighbouring heads' columns stay right
// (the reference covers every column of every head).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/attention/attention.h"
#include "kernels/attention/autotune.h"
#include "tests/kernels/attention/attention_case.h"

namespace gemma::kernels::testing {
namespace {

constexpr double kTolerance = 1e-2;

class PaddedHeadDimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    attention::AutotuneCache::Get().Configure(true, "/tmp/gemma-attention-test-autotune.txt");
  }

  // Runs `launch` over the slot view and the paged view (bf16, then with
  // fp8 the E4M3 copy).
  template <typename Launch>
  void Check(const AttentionCase& c, bool fp8, const std::string& what, Launch launch) {
    AttentionProblem prob(c);
    const std::vector<double> ref = prob.Reference();
    for (int view = 0; view < 2; ++view) {
      SCOPED_TRACE(what + (view ? " paged" : " slots") + (fp8 ? " e4m3" : " bf16"));
      AttentionParams p = view ? prob.PagedParams(16) : prob.Params();
      if (fp8) p = prob.Fp8(p);
      CUDA_OK(prob.Poison());
      ASSERT_EQ(launch(p), "");
      CUDA_OK(cudaDeviceSynchronize());
      const ErrorReport r = Compare(prob.Output(), ref);
      EXPECT_EQ(r.num_not_finite, 0);
      EXPECT_LT(r.rel_error, kTolerance);
    }
  }

  void Prefill(AttentionCase c) {
    const std::vector<std::string> configs = PrefillAttentionConfigs(c.head_dim);
    ASSERT_EQ(configs.size(), 1u) << "a padded head_dim has one configuration";
    for (bool fp8 : {false, true}) {
      c.e4m3_values = fp8;
      for (const std::string& name : {configs[0], std::string("default"), std::string()}) {
        Check(c, fp8, "prefill " + (name.empty() ? std::string("autotuned") : name), [&](const AttentionParams& p) {
          return name.empty() ? LaunchPrefillAttention(p, nullptr) : LaunchPrefillAttentionWithConfig(p, name, nullptr);
        });
      }
    }
  }

  void Decode(AttentionCase c, std::initializer_list<int> splits) {
    for (bool fp8 : {false, true}) {
      c.e4m3_values = fp8;
      for (int num_splits : splits) {
        DeviceBuffer ws(DecodeWorkspaceBytes(static_cast<int>(c.q_lens.size()), c.num_heads, c.head_dim, num_splits));
        if (ws.bytes() > 0) CUDA_OK(cudaMemset(ws.as<void>(), 0xff, ws.bytes()));
        Check(c, fp8, "decode, splits " + std::to_string(num_splits), [&](const AttentionParams& p) {
          return LaunchDecodeAttention(p, ws.as<void>(), num_splits, nullptr);
        });
      }
    }
  }
};

// 16 and 48 (the parity checkpoints' head_dims), and one head_dim padded on
// each larger instance (128, 256 and 512: column-split warps, E4M3 builds
// with their own occupancy).
constexpr int kHeadDims[] = {16, 48, 112, 208, 400};

TEST_F(PaddedHeadDimTest, Prefill) {
  for (int d : kHeadDims) {
    for (int kv : {1, 2}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + " kv heads " + std::to_string(kv));
      AttentionCase c{.head_dim = d, .num_heads = 4, .num_kv_heads = kv, .capacity = 160, .num_slots = 2};
      c.q_lens = {130, 17};
      c.q_pos0 = {0, 100};
      c.slots = {1, 0};
      c.poison_unused_cache = true;
      c.seed = 40 + d + kv;
      Prefill(c);
    }
  }
}

TEST_F(PaddedHeadDimTest, PrefillSlidingRing) {
  for (int d : {16, 48}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    AttentionCase c{.head_dim = d, .num_heads = 8, .num_kv_heads = 2, .window = 16, .capacity = 40,
                    .num_slots = 2, .ring = true};
    c.q_lens = {25, 7};
    c.q_pos0 = {0, 50};
    c.slots = {1, 0};
    c.seed = 70 + d;
    Prefill(c);
  }
}

TEST_F(PaddedHeadDimTest, Decode) {
  for (int d : kHeadDims) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    AttentionCase c = DecodeCase(d, 8, 2, {1, 33, 300}, {2, 0, 1});
    c.capacity = 320;
    c.poison_unused_cache = true;
    c.seed = 90 + d;
    Decode(c, {1, 4, 11});
  }
}

TEST_F(PaddedHeadDimTest, DecodeSlidingRing) {
  for (int d : {16, 48}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    AttentionCase c = DecodeCase(d, 4, 1, {15, 16, 17, 41}, {2, 3, 0, 1});
    c.window = 16;
    c.capacity = 16;
    c.ring = true;
    c.seed = 110 + d;
    Decode(c, {1, 3});
  }
}

TEST_F(PaddedHeadDimTest, RefusesOtherHeadDims) {
  AttentionCase c{.head_dim = 48, .num_heads = 4, .num_kv_heads = 2, .capacity = 16};
  c.q_lens = {4};
  c.q_pos0 = {0};
  c.slots = {0};
  AttentionProblem prob(c);
  for (int d : {40, 8, 528}) {
    AttentionParams p = prob.Params();
    p.head_dim = d;
    const std::string want = "unsupported head_dim " + std::to_string(d);
    EXPECT_NE(LaunchPrefillAttention(p, nullptr).find(want), std::string::npos) << d;
    p.max_q_len = 1;
    EXPECT_NE(LaunchDecodeAttention(p, nullptr, 1, nullptr).find(want), std::string::npos) << d;
  }
}

}  // namespace
}  // namespace gemma::kernels::testing
