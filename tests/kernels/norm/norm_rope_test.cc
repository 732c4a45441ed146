// Residual norm and QKV norm+RoPE+KV-append vs CPU references at the 31B
// shapes (D=256 sliding ring, D=512 global 8-way GQA with k_eq_v and
// proportional partial RoPE) and the fixtures' small heads.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/elementwise/elementwise.h"
#include "kernels/norm/residual_norm.h"
#include "kernels/rope/qkv_rope.h"
#include "tests/common/fp8_test_util.h"
#include "tests/common/gpu_test_util.h"

namespace gemma {
namespace {

using gpu_test::DeviceArray;
using gpu_test::ToF;

// left_scales: the branch holds unscaled FP8 GEMM sums with the column and
// token scales that GEMM left (ResidualNormParams::branch_col_scale /
// branch_token_scale); the reference scales them first.
// late_branch: the (bf16) branch is NaN until a kernel launched just before
// the norm writes it 200 us after letting the norm launch (LaunchLateCopy):
// the norm must still read it only after its PDL wait.
// parts (fp32 branch): the branch as that many partial sums
// (ResidualNormParams::branch_parts), random pieces the kernel adds in
// order; the reference takes their float sum in that order.
// over_cluster: each token spread over a cluster of blocks
// (ResidualNormParams::over_cluster).
// cancel: the residual is minus the normed branch plus 1e-3 of a random one,
// so the new residual's sum of squares is ~1e-5 of its terms' (the kernel must
// not take it from sums in which those terms cancel).
void CheckResidualNorm(int tokens, int hidden, bool branch, bool scalar, bool f32_branch = false,
                       bool left_scales = false, bool launch_next_early = false, bool late_branch = false,
                       int parts = 1, bool over_cluster = false, bool cancel = false) {
  SCOPED_TRACE(testing::Message() << "tokens=" << tokens << " hidden=" << hidden << " branch=" << branch
                                  << " left_scales=" << left_scales << " early=" << launch_next_early
                                  << " parts=" << parts << " over_cluster=" << over_cluster << " cancel=" << cancel);
  const size_t n = static_cast<size_t>(tokens) * hidden;
  auto h0 = gpu_test::RandomFloats(n, 0.0f, 3.0f);
  const auto br = gpu_test::ToBf16(gpu_test::RandomFloats(n, 0.0f, left_scales ? 200.0f : 1.0f));
  const auto col = gpu_test::RandomFloats(hidden, 0.005f, 0.001f);
  const auto tok = gpu_test::RandomFloats(tokens, 0.01f, 0.002f);
  DeviceArray<float> dcol(col), dtok(tok);
  std::vector<float> pieces = gpu_test::RandomFloats(n * parts, 0.0f, 0.5f);
  std::vector<float> summed(n);
  for (size_t i = 0; i < n; ++i) {
    float rest = 0.0f;
    for (int q = 1; q < parts; ++q) rest += pieces[q * n + i];
    pieces[i] = ToF(br[i]) - rest;
    float sum = pieces[i];
    for (int q = 1; q < parts; ++q) sum += pieces[q * n + i];
    summed[i] = sum;
  }
  auto branch_value = [&](int t, int i) {
    const double v = parts > 1 ? summed[size_t(t) * hidden + i] : ToF(br[size_t(t) * hidden + i]);
    return left_scales ? v * col[i] * tok[t] : v;
  };
  const auto wb = gpu_test::RandomFloats(hidden, 1.0f, 0.3f);
  const auto wo = gpu_test::RandomFloats(hidden, 1.0f, 0.3f);
  const float s = 0.7f;
  if (cancel) {
    for (int t = 0; t < tokens; ++t) {
      double ss = 0;
      for (int i = 0; i < hidden; ++i) ss += branch_value(t, i) * branch_value(t, i);
      const double rb = 1.0 / std::sqrt(ss / hidden + 1e-6);
      for (int i = 0; i < hidden; ++i) {
        const double normed = branch_value(t, i) * rb * wb[i];
        h0[size_t(t) * hidden + i] = static_cast<float>(-normed + 1e-3 * h0[size_t(t) * hidden + i]);
      }
    }
  }
  DeviceArray<float> dh(h0), dwb(wb), dwo(wo), ds(std::vector<float>{s});
  DeviceArray<__nv_bfloat16> dbr(br), dout(n);
  DeviceArray<float> dbr32(parts > 1 ? pieces : gpu_test::ToFloat(br));
  dout.Poison();
  kernels::ResidualNormParams p;
  p.branch = branch && !f32_branch ? dbr.get() : nullptr;
  p.branch_f32 = branch && f32_branch ? dbr32.get() : nullptr;
  p.branch_parts = parts;
  p.branch_weight = dwb.get();
  if (left_scales) {
    p.branch_col_scale = dcol.get();
    p.branch_token_scale = dtok.get();
  }
  p.layer_scalar = scalar ? ds.get() : nullptr;
  p.residual = dh.get();
  p.out_weight = dwo.get();
  p.out = dout.get();
  p.num_tokens = tokens;
  p.hidden = hidden;
  p.eps = 1e-6f;
  p.launch_next_early = launch_next_early;
  p.over_cluster = over_cluster;
  if (late_branch) {
    ASSERT_TRUE(branch && !f32_branch);
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    DeviceArray<float> warm_h(h0);  // a first launch loads the kernel; its residual is a copy
    kernels::ResidualNormParams warm = p;
    warm.residual = warm_h.get();
    ASSERT_EQ(kernels::LaunchResidualNorm(warm, stream), "");
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    DeviceArray<__nv_bfloat16> good(br);
    dout.Poison();
    ASSERT_EQ(cudaMemset(dbr.get(), 0xFF, n * sizeof(__nv_bfloat16)), cudaSuccess);
    kernels::LateCopyParams late;
    late.delay_ns = 200'000;
    late.copies[late.count++] = {dbr.get(), good.get(), n * sizeof(__nv_bfloat16)};
    ASSERT_EQ(kernels::LaunchLateCopy(late, stream), "");
    ASSERT_EQ(kernels::LaunchResidualNorm(p, stream), "");
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaStreamDestroy(stream);
  } else {
    ASSERT_EQ(kernels::LaunchResidualNorm(p, nullptr), "");
  }
  const auto got_h = dh.Download();
  const auto got = gpu_test::ToFloat(dout.Download());
  std::vector<double> ref_h(n), ref(n);
  for (int t = 0; t < tokens; ++t) {
    const size_t o = static_cast<size_t>(t) * hidden;
    double ss = 0;
    for (int i = 0; i < hidden; ++i) ss += branch_value(t, i) * branch_value(t, i);
    const double rb = 1.0 / std::sqrt(ss / hidden + 1e-6);
    double ss2 = 0;
    for (int i = 0; i < hidden; ++i) {
      double v = h0[o + i];
      if (branch) v = (scalar ? s : 1.0) * (v + branch_value(t, i) * rb * wb[i]);
      ref_h[o + i] = v;
      ss2 += v * v;
    }
    const double r = 1.0 / std::sqrt(ss2 / hidden + 1e-6);
    for (int i = 0; i < hidden; ++i) ref[o + i] = ref_h[o + i] * r * wo[i];
  }
  // (With cancel, the fp32 sum h + rb b w carries ~1e-7 of |h|: 1e-4 of the result.)
  EXPECT_LT(gpu_test::RelErr(got_h, ref_h, 0, n), cancel ? 3e-4 : 1e-5);
  for (int t = 0; t < tokens; ++t) EXPECT_LT(gpu_test::RelErr(got, ref, size_t(t) * hidden, hidden), 8e-3);
}

TEST(ResidualNormTest, RealShapeAndEdges) {
  GEMMA_REQUIRE_GPU();
  CheckResidualNorm(1, 5376, true, true);
  CheckResidualNorm(5, 5376, true, false);
  CheckResidualNorm(3, 5376, false, false);
  CheckResidualNorm(17, 128, true, true);
  CheckResidualNorm(4, 5376, true, true, /*f32_branch=*/true);
  CheckResidualNorm(2, 8, true, true);
  // Vectors per thread 1 (exactly), 2, 3 (2 and a part), 4, 8 (the largest hidden).
  CheckResidualNorm(3, 2048, true, true);
  CheckResidualNorm(2, 4096, true, true);
  CheckResidualNorm(2, 4104, true, false);
  CheckResidualNorm(2, 8192, true, true);
  CheckResidualNorm(2, 16384, true, true);
  CheckResidualNorm(2, 16384, false, false);
  // From 256 tokens the kernel reads the weights where it uses them (three
  // blocks per multiprocessor): the same shapes and edges.
  CheckResidualNorm(300, 5376, true, true);
  CheckResidualNorm(256, 5376, false, false);
  CheckResidualNorm(257, 5376, true, false, /*f32_branch=*/true);
  CheckResidualNorm(260, 4104, true, true);
  CheckResidualNorm(256, 8192, true, true);
  CheckResidualNorm(256, 6160, true, false);
  CheckResidualNorm(256, 16384, true, true);
  CheckResidualNorm(300, 8, true, true);
}

// The decode form that lets the next kernel launch before its own wait
// (GEMMA_NORM_EARLY_LAUNCH): the same results, and the branch a previous
// kernel writes late still read only after the wait (both forms).
TEST(ResidualNormTest, LaunchingTheNextKernelEarlyChangesNoResult) {
  GEMMA_REQUIRE_GPU();
  CheckResidualNorm(1, 5376, true, true, false, false, /*launch_next_early=*/true);
  CheckResidualNorm(4, 5376, true, false, false, false, true);
  CheckResidualNorm(3, 5376, false, false, false, false, true);
  CheckResidualNorm(2, 16384, true, true, false, false, true);
  CheckResidualNorm(2, 4104, true, true, /*f32_branch=*/true, false, true);
  for (bool early : {false, true}) {
    CheckResidualNorm(1, 5376, true, true, false, false, early, /*late_branch=*/true);
    CheckResidualNorm(4, 5376, true, false, false, false, early, true);
  }
}

// A valid norm of one 8-wide token with a bf16 branch (the argument checks
// start from it).
kernels::ResidualNormParams OneTokenOfEight(float* h, float* w, __nv_bfloat16* b, __nv_bfloat16* out) {
  kernels::ResidualNormParams p;
  p.branch = b;
  p.branch_weight = w;
  p.residual = h;
  p.out_weight = w;
  p.out = out;
  p.num_tokens = 1;
  p.hidden = 8;
  return p;
}

// A split W4A16 linear's partial sums as the branch, added in order.
TEST(ResidualNormTest, AddsTheBranchsPartialSums) {
  GEMMA_REQUIRE_GPU();
  for (int parts = 2; parts <= kernels::kMaxBranchParts; ++parts) {
    CheckResidualNorm(1, 5376, true, true, /*f32_branch=*/true, false, false, false, parts);
    CheckResidualNorm(1, 5376, true, false, true, false, /*launch_next_early=*/true, false, parts);
    CheckResidualNorm(3, 4104, true, true, true, false, false, false, parts);
    CheckResidualNorm(257, 2048, true, true, true, false, false, false, parts);
  }
  // Only on an fp32 branch, and 1..kMaxBranchParts of them.
  DeviceArray<float> h(8), w(8);
  DeviceArray<__nv_bfloat16> b(8), out(8);
  kernels::ResidualNormParams p = OneTokenOfEight(h.get(), w.get(), b.get(), out.get());
  p.branch_parts = 2;
  EXPECT_NE(kernels::LaunchResidualNorm(p, nullptr), "");
  p.branch = nullptr;
  p.branch_f32 = h.get();
  p.branch_parts = kernels::kMaxBranchParts + 1;
  EXPECT_NE(kernels::LaunchResidualNorm(p, nullptr), "");
  p.branch_parts = 0;
  EXPECT_NE(kernels::LaunchResidualNorm(p, nullptr), "");
}

// The form over a cluster: every shape class of the one-block decode form (one
// and two vectors a thread, slices that leave blocks of the cluster empty),
// every kind of branch, both launch orders, and the branch a late kernel writes.
TEST(ResidualNormTest, OverAClusterMatchesTheReference) {
  GEMMA_REQUIRE_GPU();
  const bool c = true;
  for (int tokens : {1, 2, 5, kernels::kClusterNormMaxTokens}) {
    CheckResidualNorm(tokens, 5376, true, true, false, false, false, false, 1, c);
    CheckResidualNorm(tokens, 5376, false, false, false, false, false, false, 1, c);
  }
  for (int hidden : {8, 24, 128, 1040, 4104, 8192, 16384}) CheckResidualNorm(3, hidden, true, true, false, false, false, false, 1, c);
  CheckResidualNorm(2, 16384, false, true, false, false, false, false, 1, c);
  for (int parts = 1; parts <= kernels::kMaxBranchParts; ++parts) {
    CheckResidualNorm(1, 5376, true, true, /*f32_branch=*/true, false, false, false, parts, c);
    CheckResidualNorm(4, 4104, true, false, true, false, /*launch_next_early=*/true, false, parts, c);
  }
  CheckResidualNorm(16, 5376, true, true, false, /*left_scales=*/true, false, false, 1, c);
  for (int tokens : {1, 3}) {  // a new residual ~3e-3 of the old one, both forms
    CheckResidualNorm(tokens, 5376, true, true, /*f32_branch=*/true, false, false, false, 2, c, /*cancel=*/true);
    CheckResidualNorm(tokens, 5376, true, false, false, false, false, false, 1, false, true);
  }
  for (bool early : {false, true}) {
    CheckResidualNorm(1, 5376, true, true, false, false, early, false, 1, c);
    CheckResidualNorm(1, 5376, true, true, false, false, early, /*late_branch=*/true, 1, c);
    CheckResidualNorm(4, 5376, true, false, false, false, early, true, 1, c);
  }
  // Up to kClusterNormMaxTokens tokens only.
  DeviceArray<float> h(8 * 17), w(8);
  DeviceArray<__nv_bfloat16> b(8 * 17), out(8 * 17);
  kernels::ResidualNormParams p = OneTokenOfEight(h.get(), w.get(), b.get(), out.get());
  p.over_cluster = true;
  p.num_tokens = kernels::kClusterNormMaxTokens + 1;
  const std::string err = kernels::LaunchResidualNorm(p, nullptr);
  EXPECT_NE(err.find("got 17"), std::string::npos) << err;
  p.num_tokens = kernels::kClusterNormMaxTokens;
  EXPECT_EQ(kernels::LaunchResidualNorm(p, nullptr), "");
}

TEST(ResidualNormTest, AppliesScalesLeftByTheGemm) {
  GEMMA_REQUIRE_GPU();
  CheckResidualNorm(64, 5376, true, true, false, /*left_scales=*/true);
  CheckResidualNorm(3, 16384, true, false, false, /*left_scales=*/true);
  CheckResidualNorm(300, 5376, true, true, false, /*left_scales=*/true);
  // Both scales or neither, and only on a bf16 branch.
  DeviceArray<float> h(8), w(8), scale(8);
  DeviceArray<__nv_bfloat16> b(8), out(8);
  kernels::ResidualNormParams p = OneTokenOfEight(h.get(), w.get(), b.get(), out.get());
  p.branch_col_scale = scale.get();
  EXPECT_NE(kernels::LaunchResidualNorm(p, nullptr), "");
  p.branch_token_scale = scale.get();
  EXPECT_EQ(kernels::LaunchResidualNorm(p, nullptr), "");
  p.branch = nullptr;
  p.branch_f32 = h.get();
  EXPECT_NE(kernels::LaunchResidualNorm(p, nullptr), "");
}

struct RopeCase {
  int heads, kv_heads, head_dim, rope_pairs;
  bool k_eq_v, ring;
  int capacity;
  float theta;
  std::vector<int> positions;
};

// CPU reference of one head: rms (weight optional), then rotate-half RoPE.
std::vector<double> RefHead(const float* x, const float* w, int d, int pairs, float theta, int pos,
                            bool rotate) {
  double ss = 0;
  for (int i = 0; i < d; ++i) ss += double(x[i]) * x[i];
  const double r = 1.0 / std::sqrt(ss / d + 1e-6);
  std::vector<double> n(d), out(d);
  for (int i = 0; i < d; ++i) n[i] = x[i] * r * (w ? w[i] : 1.0);
  out = n;
  if (!rotate) return out;
  for (int k = 0; k < pairs; ++k) {
    const double ang = pos * std::pow(double(theta), -2.0 * k / d);
    out[k] = n[k] * std::cos(ang) - n[k + d / 2] * std::sin(ang);
    out[k + d / 2] = n[k + d / 2] * std::cos(ang) + n[k] * std::sin(ang);
  }
  return out;
}

void CheckQkvRope(const RopeCase& c) {
  SCOPED_TRACE(testing::Message() << "D=" << c.head_dim << " kv=" << c.kv_heads << " ring=" << c.ring);
  const int t = static_cast<int>(c.positions.size()), d = c.head_dim, slots = 2;
  const int width = (c.heads + c.kv_heads * (c.k_eq_v ? 1 : 2)) * d;
  const auto qkv = gpu_test::ToFloat(gpu_test::ToBf16(gpu_test::RandomFloats(size_t(t) * width, 0, 2)));
  const auto qn = gpu_test::RandomFloats(d, 1.0f, 0.3f), kn = gpu_test::RandomFloats(d, 1.0f, 0.3f);
  std::vector<int> slot(t);
  for (int i = 0; i < t; ++i) slot[i] = i % slots;
  DeviceArray<__nv_bfloat16> dqkv(gpu_test::ToBf16(qkv)), dq(size_t(t) * c.heads * d);
  const size_t cache_n = size_t(slots) * c.capacity * c.kv_heads * d;
  DeviceArray<__nv_bfloat16> dk(cache_n), dv(cache_n);
  DeviceArray<float> dqn(qn), dkn(kn);
  DeviceArray<int> dpos(c.positions), dslot(slot);
  dq.Poison();
  kernels::QkvRopeParams p{dqkv.get(), dqn.get(), dkn.get(), dpos.get(), dslot.get(), dq.get(), dk.get(),
                           dv.get(), t, c.heads, c.kv_heads, d, c.k_eq_v, slots, c.capacity, c.ring,
                           c.rope_pairs, c.theta, 1e-6f};
  ASSERT_EQ(kernels::LaunchQkvRope(p, nullptr), "");
  const auto q = gpu_test::ToFloat(dq.Download());
  const auto k = gpu_test::ToFloat(dk.Download()), v = gpu_test::ToFloat(dv.Download());
  for (int i = 0; i < t; ++i) {
    const float* row = qkv.data() + size_t(i) * width;
    const int pos = c.positions[i];
    for (int h = 0; h < c.heads; ++h) {
      const auto ref = RefHead(row + h * d, qn.data(), d, c.rope_pairs, c.theta, pos, true);
      EXPECT_LT(gpu_test::RelErrPtr(q.data() + (size_t(i) * c.heads + h) * d, ref.data(), d), 8e-3);
    }
    const size_t idx = c.ring ? pos % c.capacity : pos;
    for (int j = 0; j < c.kv_heads; ++j) {
      const size_t at = ((size_t(slot[i]) * c.capacity + idx) * c.kv_heads + j) * d;
      const auto rk = RefHead(row + (c.heads + j) * d, kn.data(), d, c.rope_pairs, c.theta, pos, true);
      const int vsrc = c.k_eq_v ? c.heads + j : c.heads + c.kv_heads + j;
      const auto rv = RefHead(row + vsrc * d, nullptr, d, 0, c.theta, pos, false);
      EXPECT_LT(gpu_test::RelErrPtr(k.data() + at, rk.data(), d), 8e-3) << "token " << i << " kv " << j;
      EXPECT_LT(gpu_test::RelErrPtr(v.data() + at, rv.data(), d), 8e-3) << "token " << i << " kv " << j;
    }
  }

  // The same into an E4M3 cache (--kv-cache-dtype fp8): every written code
  // within E4M3's rounding (half a unit: 2^-4 relative, 2^-10 absolute
  // below the normal range) of the bf16 cache's value; q unchanged.
  DeviceArray<uint8_t> dk8(cache_n), dv8(cache_n);
  DeviceArray<__nv_bfloat16> dq8(size_t(t) * c.heads * d);
  kernels::QkvRopeParams p8 = p;
  p8.q_out = dq8.get();
  p8.k_cache = dk8.get();
  p8.v_cache = dv8.get();
  p8.kv_fp8 = true;
  ASSERT_EQ(kernels::LaunchQkvRope(p8, nullptr), "");
  EXPECT_EQ(dq8.Download(), dq.Download());
  const auto k8 = dk8.Download(), v8 = dv8.Download();
  int checked = 0, bad = 0;
  for (int i = 0; i < t; ++i) {
    const size_t idx = c.ring ? c.positions[i] % c.capacity : c.positions[i];
    for (int j = 0; j < c.kv_heads; ++j) {
      const size_t at = ((size_t(slot[i]) * c.capacity + idx) * c.kv_heads + j) * d;
      for (int e = 0; e < d; ++e) {
        for (const auto& [code, want] : {std::pair{k8[at + e], k[at + e]}, std::pair{v8[at + e], v[at + e]}}) {
          const float got = fp8_test::Decode(code);
          ++checked;
          if (std::fabs(got - want) <= 0.0625f * std::fabs(want) + 1.0f / 1024) continue;
          if (bad++ == 0) {
            ADD_FAILURE() << "token " << i << " kv " << j << " dim " << e << ": E4M3 " << got << " vs bf16 " << want;
          }
        }
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << checked << " K/V codes";
}

TEST(QkvRopeTest, SlidingD256RingWrap) {
  GEMMA_REQUIRE_GPU();
  // 31B sliding: ring of window 1024 + chunk 2048 - 1; positions across the wrap.
  CheckQkvRope({32, 16, 256, 128, false, true, 3071, 1e4f, {0, 1, 1023, 1024, 3070, 3071, 3072, 9000}});
}

TEST(QkvRopeTest, GlobalD512PartialRopeKEqV) {
  GEMMA_REQUIRE_GPU();
  CheckQkvRope({32, 4, 512, 64, true, false, 8192, 1e6f, {0, 5, 777, 4095, 8191}});
}

TEST(QkvRopeTest, FixtureHeads) {
  GEMMA_REQUIRE_GPU();
  CheckQkvRope({4, 2, 32, 16, false, true, 31, 1e4f, {0, 15, 16, 30, 32, 97}});
  CheckQkvRope({4, 1, 64, 8, true, false, 128, 1e6f, {3}});
  CheckQkvRope({4, 1, 128, 16, true, false, 128, 1e6f, {0, 100, 127}});
}

TEST(QkvRopeTest, RejectsBadHeadDim) {
  kernels::QkvRopeParams p;
  EXPECT_NE(kernels::LaunchQkvRope(p, nullptr), "");
}

}  // namespace
}  // namespace gemma
