// The Hopper (wgmma) prefill candidates ("wg-" configurations) against the
// float64 host reference: D = 512 (GQA 8, causal) and D = 256 (sliding
// window), lengths on and off the 64 / 128-row and 32 / 64-key tiles,
// chunked sequences, slot, ring and paged caches (scrambled blocks of 16
// and 4, released blocks, NaN-filled pools); their E4M3-cache builds (f16
// products) are at least as close to the reference as the bf16 builds on
// the same E4M3 values.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/attention/attention.h"
#include "tests/kernels/attention/attention_case.h"

namespace gemma::kernels::testing {
namespace {

constexpr double kTolerance = 1e-2;

std::vector<std::string> HopperConfigs(int head_dim, bool kv_fp8 = false) {
  std::vector<std::string> names;
  for (const std::string& n : PrefillAttentionConfigs(head_dim, kv_fp8))
    if (n.rfind("wg-", 0) == 0) names.push_back(n);
  return names;
}

class HopperPrefillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    setenv("GEMMA_AUTOTUNE_CACHE", "/tmp/gemma-attention-test-autotune.txt", 1);
  }

  // Every wg- configuration of the head_dim on the slot (or ring) cache and
  // on paged copies of it with each of `block_sizes`.
  void Check(const AttentionCase& c, std::vector<int> block_sizes = {16, 4}) {
    const std::vector<std::string> configs = HopperConfigs(c.head_dim);
    ASSERT_FALSE(configs.empty()) << "no wg- configuration for head_dim " << c.head_dim;
    AttentionProblem prob(c);
    const std::vector<double> ref = prob.Reference();
    block_sizes.insert(block_sizes.begin(), 0);  // 0: the slot cache
    for (int bs : block_sizes) {
      const AttentionParams p = bs == 0 ? prob.Params() : prob.PagedParams(bs);
      for (const std::string& name : configs) {
        SCOPED_TRACE(name + (bs == 0 ? std::string(" slots") : " paged block " + std::to_string(bs)));
        CUDA_OK(prob.Poison());
        ASSERT_EQ(LaunchPrefillAttentionWithConfig(p, name, nullptr), "");
        CUDA_OK(cudaDeviceSynchronize());
        const ErrorReport r = Compare(prob.Output(), ref);
        EXPECT_EQ(r.num_not_finite, 0);
        EXPECT_LT(r.rel_error, kTolerance);
      }
    }
  }
};

TEST_F(HopperPrefillTest, Global512LengthsAroundTheTiles) {
  for (int len : {1, 31, 64, 65, 129, 700}) {
    SCOPED_TRACE("q_len " + std::to_string(len));
    AttentionCase c{.head_dim = 512, .num_heads = 8, .num_kv_heads = 1, .capacity = len};
    c.q_lens = {len};
    c.q_pos0 = {0};
    c.slots = {0};
    c.seed = 100 + len;
    Check(c);
  }
}

TEST_F(HopperPrefillTest, Global512ChunksOfSeveralSequences) {
  AttentionCase c{.head_dim = 512, .num_heads = 16, .num_kv_heads = 2, .capacity = 1100, .num_slots = 3};
  c.q_lens = {200, 1, 77};
  c.q_pos0 = {300, 0, 1000};  // earlier keys already cached
  c.slots = {2, 0, 1};
  c.poison_unused_cache = true;  // rows past a sequence's end are NaN
  c.seed = 7;
  Check(c);
}

TEST_F(HopperPrefillTest, Sliding256WindowRingAndReleasedBlocks) {
  // Window 1024, keys 377..1399: the ring wraps and the paged tables'
  // first blocks are released (-1).
  AttentionCase c{.head_dim = 256, .num_heads = 8, .num_kv_heads = 4, .window = 1024, .capacity = 1400,
                  .num_slots = 2, .ring = true};
  c.q_lens = {300, 45};
  c.q_pos0 = {1100, 0};
  c.slots = {1, 0};
  c.poison_unused_cache = true;
  c.seed = 8;
  Check(c);
}

TEST_F(HopperPrefillTest, SmallWindowsInsideATile) {
  for (int d : {256, 512}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    AttentionCase c{.head_dim = d, .num_heads = 8, .num_kv_heads = 2, .window = 37, .capacity = 320,
                    .num_slots = 2};
    c.q_lens = {150, 45};
    c.q_pos0 = {0, 203};
    c.slots = {1, 0};
    c.poison_unused_cache = true;
    c.seed = 9 + d;
    Check(c);
  }
}

// The E4M3 build widens the codes to f16 exactly and multiplies f16 (Q and P
// keep 3 more mantissa bits than in bf16): no further from the float64
// reference than the bf16 build over the same values (subnormal codes
// included: |x| < 2^-6 among the uniform [-1, 1] draws). A wrong widening or
// layout gives errors of order 1.
TEST_F(HopperPrefillTest, E4m3CacheAsCloseAsTheBf16Build) {
  AttentionCase global{.head_dim = 512, .num_heads = 16, .num_kv_heads = 2, .capacity = 1100, .num_slots = 3};
  global.q_lens = {200, 1, 77};
  global.q_pos0 = {300, 0, 1000};
  global.slots = {2, 0, 1};
  global.seed = 21;
  AttentionCase sliding{.head_dim = 256, .num_heads = 8, .num_kv_heads = 4, .window = 1024, .capacity = 1400,
                        .num_slots = 2, .ring = true};
  sliding.q_lens = {300, 45};
  sliding.q_pos0 = {1100, 0};
  sliding.slots = {1, 0};
  sliding.seed = 22;
  for (AttentionCase c : {global, sliding}) {
    c.e4m3_values = true;
    c.poison_unused_cache = true;
    const std::vector<std::string> configs = HopperConfigs(c.head_dim, /*kv_fp8=*/true);
    ASSERT_FALSE(configs.empty()) << "no wg- E4M3 build for head_dim " << c.head_dim;
    AttentionProblem prob(c);
    const std::vector<double> ref = prob.Reference();
    for (int bs : {0, 16}) {
      const AttentionParams bf16 = bs == 0 ? prob.Params() : prob.PagedParams(bs);
      const AttentionParams fp8 = prob.Fp8(bf16);
      for (const std::string& name : configs) {
        SCOPED_TRACE(name + " head_dim " + std::to_string(c.head_dim) + (bs == 0 ? " slots" : " paged"));
        CUDA_OK(prob.Poison());
        ASSERT_EQ(LaunchPrefillAttentionWithConfig(bf16, name, nullptr), "");
        CUDA_OK(cudaDeviceSynchronize());
        const std::vector<float> want = prob.Output();
        CUDA_OK(prob.Poison());
        ASSERT_EQ(LaunchPrefillAttentionWithConfig(fp8, name, nullptr), "");
        CUDA_OK(cudaDeviceSynchronize());
        const std::vector<float> got = prob.Output();
        const ErrorReport r = Compare(got, ref), r_bf16 = Compare(want, ref);
        EXPECT_EQ(r.num_not_finite, 0);
        EXPECT_LT(r.rel_error, kTolerance);
        EXPECT_LE(r.rel_error, r_bf16.rel_error * 1.05) << "E4M3 build " << r.rel_error << " vs bf16 build "
                                                         << r_bf16.rel_error;
      }
    }
  }
}

TEST_F(HopperPrefillTest, AutotunerMayPickIt) {
  // The wg- candidates are in the table the autotuner times.
  for (int d : {256, 512}) {
    const std::vector<std::string> all = PrefillAttentionConfigs(d);
    EXPECT_GT(all.size(), HopperConfigs(d).size());
    EXPECT_FALSE(HopperConfigs(d).empty());
  }
  // The candidates holding Q's first half in registers have an E4M3-cache
  // build (its codes are staged where that half was); the others do not.
  for (int d : {256, 512}) {
    const std::vector<std::string> e4m3 = HopperConfigs(d, /*kv_fp8=*/true);
    EXPECT_FALSE(e4m3.empty()) << d;
    for (const std::string& n : e4m3) EXPECT_NE(n.find('q'), std::string::npos) << n;
    EXPECT_LT(e4m3.size(), HopperConfigs(d).size()) << d;
  }
}

}  // namespace
}  // namespace gemma::kernels::testing
