// Attention over an E4M3 KV cache (--kv-cache-dtype fp8). With K and V that
// are E4M3 values, the fp8-cache kernels (raw tiles read by ldmatrix in a
// permuted head_dim order, f16 MMAs) must match the float64 reference at
// least as closely as the bf16-cache kernels do on the same values (f16
// keeps 3 more mantissa bits of Q and P than bf16): decode at several split
// counts and prefill in every tile configuration built for it, slot, ring
// and paged caches, the 31B shapes and the fixtures' head_dims, NaN in
// unused cache rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/autotune.h"
#include "kernels/attention/kv_expand.h"
#include "tests/kernels/attention/attention_case.h"

namespace gemma::kernels::testing {
namespace {

constexpr double kTolerance = 1e-2;
// The fp8-cache error may exceed the bf16-cache one by this factor (both
// end in a bf16 output rounding, so the two are close; a wrong fragment or
// permutation gives errors of order 1).
constexpr double kNoWorseThan = 1.05;

class Fp8KvAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    attention::AutotuneCache::Get().Configure(true, "/tmp/gemma-attention-test-autotune.txt");
  }

  // Runs `launch` on the bf16 view and on its E4M3 copy, slot and paged
  // (length-unaware: slots only, every row read, unused ones NaN).
  template <typename Launch>
  void Compare2(AttentionCase c, const std::string& what, Launch launch) {
    c.e4m3_values = true;
    AttentionProblem prob(c);
    const std::vector<double> ref = prob.Reference();
    for (int view = 0; view < (length_aware_ ? 2 : 1); ++view) {
      SCOPED_TRACE(what + (view ? " paged" : " slots") + (length_aware_ ? "" : " length-unaware"));
      AttentionParams bf16 = view ? prob.PagedParams(16) : prob.Params();
      bf16.length_aware = length_aware_;
      const AttentionParams fp8 = prob.Fp8(bf16);
      CUDA_OK(prob.Poison());
      ASSERT_EQ(launch(bf16), "");
      CUDA_OK(cudaDeviceSynchronize());
      const std::vector<float> want = prob.Output();
      CUDA_OK(prob.Poison());
      ASSERT_EQ(launch(fp8), "");
      CUDA_OK(cudaDeviceSynchronize());
      const std::vector<float> got = prob.Output();
      const ErrorReport r = Compare(got, ref), r_bf16 = Compare(want, ref);
      EXPECT_EQ(r.num_not_finite, 0);
      EXPECT_EQ(r_bf16.num_not_finite, 0);
      EXPECT_LT(r.rel_error, kTolerance);
      EXPECT_LE(r.rel_error, r_bf16.rel_error * kNoWorseThan)
          << "fp8 cache " << r.rel_error << " vs bf16 cache " << r_bf16.rel_error;
    }
  }

  void Decode(const AttentionCase& c, std::initializer_list<int> splits) {
    for (int num_splits : splits) {
      DeviceBuffer ws(DecodeWorkspaceBytes(static_cast<int>(c.q_lens.size()), c.num_heads, c.head_dim, num_splits));
      Compare2(c, "decode, splits " + std::to_string(num_splits), [&](const AttentionParams& p) {
        return LaunchDecodeAttention(p, ws.as<void>(), num_splits, nullptr);
      });
    }
  }

  void Prefill(const AttentionCase& c) {
    std::vector<std::string> configs = PrefillAttentionConfigs(c.head_dim, /*kv_fp8=*/true);
    ASSERT_FALSE(configs.empty());
    configs.push_back("default");
    // A configuration without an E4M3 build refuses the cache by name.
    bool refused = false;
    for (const std::string& name : PrefillAttentionConfigs(c.head_dim)) {
      if (std::find(configs.begin(), configs.end(), name) != configs.end()) continue;
      AttentionCase e4m3 = c;
      e4m3.e4m3_values = true;
      AttentionProblem prob(e4m3);
      const std::string err = LaunchPrefillAttentionWithConfig(prob.Fp8(prob.Params()), name, nullptr);
      EXPECT_NE(err.find("has no E4M3-cache build"), std::string::npos) << name << ": " << err;
      refused = true;
      break;
    }
    EXPECT_TRUE(refused) << "every configuration has an E4M3 build: nothing to refuse";
    for (const std::string& name : configs) {
      Compare2(c, "prefill " + name,
               [&](const AttentionParams& p) { return LaunchPrefillAttentionWithConfig(p, name, nullptr); });
    }
    // Autotuned: each cache dtype has its own tuning bucket.
    Compare2(c, "prefill autotuned", [&](const AttentionParams& p) { return LaunchPrefillAttention(p, nullptr); });
  }

  bool length_aware_ = true;
};

TEST_F(Fp8KvAttentionTest, DecodeGlobal31B) {
  AttentionCase c = DecodeCase(512, 32, 4, {1, 777, 2000}, {1, 2, 0});
  c.capacity = 2048;
  c.poison_unused_cache = true;
  Decode(c, {1, 7, 64, 128});  // 128: more splits than keys in a sequence
}

TEST_F(Fp8KvAttentionTest, DecodeSliding31BRing) {
  AttentionCase c = DecodeCase(256, 32, 16, {1030, 1024, 1025, 500, 3001}, {4, 0, 3, 1, 2});
  c.window = 1024;
  c.capacity = 1024;
  c.ring = true;
  c.poison_unused_cache = true;
  c.seed = 2;
  Decode(c, {1, 9});
}

// GQA groups above the key-rows kernel's 8 query heads per KV head run the
// tile kernel's E4M3 build (the default at D 256 / 512 is a key-rows build);
// a key-rows build named for such a group is refused by name.
TEST_F(Fp8KvAttentionTest, DecodeGroupsAboveEightFallBackToTheTileBuild) {
  for (int d : {256, 512}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    AttentionCase c = DecodeCase(d, 32, 2, {1, 300, 900}, {1, 2, 0});  // 16 query heads per KV head
    c.capacity = 1024;
    c.poison_unused_cache = true;
    c.seed = 11;
    Decode(c, {1, 9});
    const std::vector<std::string> variants = DecodeVariants(d, /*kv_fp8=*/true);
    const auto kr = std::find_if(variants.begin(), variants.end(),
                                 [](const std::string& n) { return n.rfind("kr", 0) == 0; });
    ASSERT_NE(kr, variants.end());
    AttentionCase exact = c;
    exact.e4m3_values = true;
    AttentionProblem prob(exact);
    DeviceBuffer ws(DecodeWorkspaceBytes(3, 32, d, 1));
    const std::string err = LaunchDecodeAttentionVariant(prob.Fp8(prob.Params()), ws.as<void>(), 1,
                                                         static_cast<int>(kr - variants.begin()), nullptr);
    EXPECT_NE(err.find("serves at most 8 query heads per KV head, got 16"), std::string::npos) << err;
  }
}

// The alternative E4M3-cache decode builds (benchmarks choose among them)
// on the 31B's shapes, slot and paged caches, one and several splits.
TEST_F(Fp8KvAttentionTest, DecodeAlternativeBuilds) {
  AttentionCase global = DecodeCase(512, 32, 4, {1, 777, 2000}, {1, 2, 0});
  global.capacity = 2048;
  global.poison_unused_cache = true;
  AttentionCase sliding = DecodeCase(256, 32, 16, {1030, 1024, 1025, 500, 3001}, {4, 0, 3, 1, 2});
  sliding.window = 1024;
  sliding.capacity = 1024;
  sliding.ring = true;
  sliding.poison_unused_cache = true;
  sliding.seed = 2;
  for (const AttentionCase& c : {global, sliding}) {
    const std::vector<std::string> variants = DecodeVariants(c.head_dim, /*kv_fp8=*/true);
    ASSERT_FALSE(variants.empty()) << "head_dim " << c.head_dim;
    for (int v = 0; v < static_cast<int>(variants.size()); ++v) {
      for (int num_splits : {1, 9}) {
        DeviceBuffer ws(DecodeWorkspaceBytes(static_cast<int>(c.q_lens.size()), c.num_heads, c.head_dim, num_splits));
        Compare2(c, variants[static_cast<size_t>(v)] + ", splits " + std::to_string(num_splits),
                 [&](const AttentionParams& p) {
                   // The bf16 view runs the default build: the reference the E4M3 run must match.
                   return p.kv_fp8 ? LaunchDecodeAttentionVariant(p, ws.as<void>(), num_splits, v, nullptr)
                                   : LaunchDecodeAttention(p, ws.as<void>(), num_splits, nullptr);
                 });
      }
    }
  }
  // An unknown index is refused by name.
  AttentionCase exact = global;
  exact.e4m3_values = true;
  AttentionProblem prob(exact);
  DeviceBuffer ws(DecodeWorkspaceBytes(3, 32, 512, 1));
  EXPECT_NE(LaunchDecodeAttentionVariant(prob.Fp8(prob.Params()), ws.as<void>(), 1, 99, nullptr)
                .find("no E4M3-cache variant 99"),
            std::string::npos);
  EXPECT_TRUE(DecodeVariants(128, true).empty());
}

TEST_F(Fp8KvAttentionTest, DecodeFixtureHeadDims) {
  for (int d : {32, 64, 128}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    AttentionCase c = DecodeCase(d, 4, 2, {1, 33, 300}, {2, 0, 1});
    c.capacity = 320;
    c.seed = 10 + d;
    Decode(c, {1, 4});
  }
}

// Length-unaware sweeps read every cache row: the E4M3 V rows past a
// sequence (NaN here) must be zeroed like the bf16 ones.
TEST_F(Fp8KvAttentionTest, LengthUnawareIgnoresGarbage) {
  length_aware_ = false;
  AttentionCase c = DecodeCase(512, 32, 4, {1, 300, 1000}, {0, 2, 1});
  c.capacity = 1100;
  c.poison_unused_cache = true;
  c.seed = 5;
  Decode(c, {1, 16});
  AttentionCase r = DecodeCase(256, 32, 16, {5, 1500}, {1, 0});
  r.window = 1024;
  r.capacity = 1100;
  r.ring = true;
  r.poison_unused_cache = true;
  r.seed = 6;
  Decode(r, {1, 8});
  AttentionCase p{.head_dim = 256, .num_heads = 32, .num_kv_heads = 16, .capacity = 400, .num_slots = 2};
  p.q_lens = {70, 9};
  p.q_pos0 = {200, 0};
  p.slots = {1, 0};
  p.poison_unused_cache = true;
  p.seed = 7;
  for (const std::string& name : PrefillAttentionConfigs(256, /*kv_fp8=*/true)) {
    Compare2(p, "prefill " + name,
             [&](const AttentionParams& q) { return LaunchPrefillAttentionWithConfig(q, name, nullptr); });
  }
}

TEST_F(Fp8KvAttentionTest, PrefillGlobal31BChunks) {
  AttentionCase c{.head_dim = 512, .num_heads = 32, .num_kv_heads = 4, .capacity = 400, .num_slots = 3};
  c.q_lens = {70, 1, 33};
  c.q_pos0 = {200, 0, 366};  // chunked prefill: earlier keys are in the cache
  c.slots = {2, 0, 1};
  c.seed = 3;
  Prefill(c);
}

TEST_F(Fp8KvAttentionTest, PrefillSliding31BRing) {
  AttentionCase c{.head_dim = 256, .num_heads = 32, .num_kv_heads = 16, .window = 1024,
                  .capacity = 1280, .num_slots = 2, .ring = true};
  c.q_lens = {200, 45};
  c.q_pos0 = {1300, 0};
  c.slots = {1, 0};
  c.poison_unused_cache = true;
  c.seed = 4;
  Prefill(c);
}

// Prefill over an E4M3 cache through the bf16 kernels: the pages widened
// into a bf16 scratch (kv_expand.h) under renumbered tables give exactly the
// bf16 cache's result (E4M3 values are bf16 values; same kernel, same keys),
// global and windowed, several sequences, chunks at depth.
TEST_F(Fp8KvAttentionTest, WidenedPagesGiveTheBf16CachesBits) {
  for (const int window : {0, 96}) {
    SCOPED_TRACE("window " + std::to_string(window));
    AttentionCase c{.head_dim = window ? 256 : 512, .num_heads = 32, .num_kv_heads = window ? 16 : 4,
                    .window = window, .capacity = 400, .num_slots = 3};
    c.q_lens = {70, 1, 33};
    c.q_pos0 = {200, 0, 366};
    c.slots = {2, 0, 1};
    c.e4m3_values = true;
    c.seed = 30 + window;
    AttentionProblem prob(c);
    const std::vector<double> ref = prob.Reference();
    const AttentionParams bf16 = prob.PagedParams(16);
    const AttentionParams fp8 = prob.Fp8(bf16);
    CUDA_OK(prob.Poison());
    ASSERT_EQ(LaunchPrefillAttentionWithConfig(bf16, "default", nullptr), "");
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<float> want = prob.Output();

    std::vector<int> q_offsets{0};
    for (int len : c.q_lens) q_offsets.push_back(q_offsets.back() + len);
    const int64_t blocks = KvExpandBlocks(c.q_pos0, q_offsets, 16, window);
    ASSERT_GT(blocks, 0);
    const size_t page = size_t{16} * c.num_kv_heads * c.head_dim;
    DeviceBuffer k(blocks * page * 2), v(blocks * page * 2), tables(4096 * sizeof(int));
    const KvExpandParams ep =
        KvExpandOf(fp8, k.as<__nv_bfloat16>(), v.as<__nv_bfloat16>(), tables.as<int>(), static_cast<int>(blocks));
    ASSERT_EQ(LaunchKvExpand(ep, nullptr), "");
    const AttentionParams widened = WidenedView(fp8, ep);
    ASSERT_FALSE(widened.kv_fp8);
    CUDA_OK(prob.Poison());
    ASSERT_EQ(LaunchPrefillAttentionWithConfig(widened, "default", nullptr), "");
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<float> got = prob.Output();
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0u) << "of " << got.size() << " outputs";
    const ErrorReport r = Compare(got, ref);
    EXPECT_EQ(r.num_not_finite, 0);
    EXPECT_LT(r.rel_error, kTolerance);
  }
}

// The host side of the widening (no GPU needed): the pages a pass needs, the
// parameters taken from the paged view, the bf16 view of the scratch, and
// refusals that name the field.
TEST(KvExpandHost, CountsPagesAndMapsViews) {
  // ceil(end / 16) - lo / 16 per sequence; lo = max(0, pos0 - window + 1).
  EXPECT_EQ(KvExpandBlocks(std::vector<int>{200, 0}, std::vector<int>{0, 70, 71}, 16, 0), 17 + 1);
  EXPECT_EQ(KvExpandBlocks(std::vector<int>{200, 0}, std::vector<int>{0, 70, 71}, 16, 96), 17 - 6 + 1);
  EXPECT_EQ(KvExpandBlocks(std::vector<int>{0, 31}, std::vector<int>{0, 0, 2}, 16, 0), 0 + 3);  // empty sequence
  EXPECT_EQ(KvExpandBlocks(std::vector<int>{1023}, std::vector<int>{0, 1}, 16, 1024), 64);
  EXPECT_EQ(KvExpandBlocks(std::vector<int>{1024}, std::vector<int>{0, 1}, 16, 1024), 65 - 0);
  EXPECT_EQ(KvExpandBlocks(std::vector<int>{1040}, std::vector<int>{0, 1}, 16, 1024), 66 - 1);

  int pool_tables[4], scratch_tables[4], offsets[2], q_offsets[3], q_pos0[2];
  AttentionParams paged;
  paged.k_cache = &pool_tables[0];
  paged.v_cache = &pool_tables[1];
  paged.kv_fp8 = true;
  paged.block_tables = pool_tables;
  paged.table_offsets = offsets;
  paged.q_offsets = q_offsets;
  paged.q_pos0 = q_pos0;
  paged.num_seqs = 2;
  paged.block_size = 32;
  paged.num_blocks = 1000;
  paged.num_kv_heads = 4;
  paged.head_dim = 512;
  paged.window = 7;
  auto* k = reinterpret_cast<__nv_bfloat16*>(&scratch_tables[2]);
  auto* v = reinterpret_cast<__nv_bfloat16*>(&scratch_tables[3]);
  const KvExpandParams e = KvExpandOf(paged, k, v, scratch_tables, 12);
  EXPECT_EQ(e.k_cache, paged.k_cache);
  EXPECT_EQ(e.v_cache, paged.v_cache);
  EXPECT_EQ(e.block_tables, pool_tables);
  EXPECT_EQ(e.table_offsets, offsets);
  EXPECT_EQ(e.q_offsets, q_offsets);
  EXPECT_EQ(e.q_pos0, q_pos0);
  EXPECT_EQ(e.num_seqs, 2);
  EXPECT_EQ(e.block_size, 32);
  EXPECT_EQ(e.num_kv_heads, 4);
  EXPECT_EQ(e.head_dim, 512);
  EXPECT_EQ(e.window, 7);
  EXPECT_EQ(e.out_blocks, 12);
  const AttentionParams w = WidenedView(paged, e);
  EXPECT_EQ(w.k_cache, static_cast<const void*>(k));
  EXPECT_EQ(w.v_cache, static_cast<const void*>(v));
  EXPECT_FALSE(w.kv_fp8);
  EXPECT_EQ(w.block_tables, scratch_tables);
  EXPECT_EQ(w.table_offsets, offsets);  // the scratch tables keep the pool tables' offsets
  EXPECT_EQ(w.num_blocks, 12);
  EXPECT_EQ(w.window, 7);

  KvExpandParams bad;
  EXPECT_NE(LaunchKvExpand(bad, nullptr).find("null"), std::string::npos);
  KvExpandParams odd = e;
  odd.block_size = 24;
  EXPECT_NE(LaunchKvExpand(odd, nullptr).find("block_size must be a power of two, got 24"), std::string::npos);
  odd = e;
  odd.head_dim = 40;
  EXPECT_NE(LaunchKvExpand(odd, nullptr).find("head_dim"), std::string::npos);
  odd = e;
  odd.out_blocks = 0;
  EXPECT_NE(LaunchKvExpand(odd, nullptr).find("out_blocks must be positive, got 0"), std::string::npos);
  odd = e;
  odd.window = -1;
  EXPECT_NE(LaunchKvExpand(odd, nullptr).find("window"), std::string::npos);
}

TEST_F(Fp8KvAttentionTest, PrefillFixtureHeadDims) {
  for (int d : {32, 64, 128}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    AttentionCase c{.head_dim = d, .num_heads = 4, .num_kv_heads = 1, .capacity = 200, .num_slots = 2};
    c.q_lens = {97, 5};
    c.q_pos0 = {0, 150};
    c.slots = {0, 1};
    c.seed = 20 + d;
    Prefill(c);
  }
}

}  // namespace
}  // namespace gemma::kernels::testing
