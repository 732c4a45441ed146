// Embedding, gelu gate, row gather, softcap, argmax and the random init vs
// CPU references at the 31B shapes (vocab 262144, hidden 5376, inter 21504).
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/elementwise/elementwise.h"
#include "kernels/init/random_init.h"
#include "kernels/sampling/argmax.h"
#include "tests/common/gpu_test_util.h"

namespace gemma {
namespace {

using gpu_test::DeviceArray;
using gpu_test::ToF;

TEST(EmbeddingTest, GathersAndScales31BTable) {
  GEMMA_REQUIRE_GPU();
  const int vocab = 262144, hidden = 5376;
  const uint64_t seed = gpu_test::Rng()();
  DeviceArray<__nv_bfloat16> table(size_t(vocab) * hidden);
  kernels::RandomFillParams rp;
  rp.out_bf16 = table.get();
  rp.count = int64_t(vocab) * hidden;
  rp.seed = seed;
  ASSERT_EQ(kernels::LaunchRandomFill(rp, nullptr), "");
  const std::vector<int32_t> ids = {2, 0, vocab - 1, 12345};
  DeviceArray<int32_t> dids(ids);
  DeviceArray<float> out(ids.size() * hidden);
  out.Poison();
  const float scale = 73.5f;
  kernels::EmbeddingParams p{dids.get(), table.get(), out.get(), int(ids.size()), hidden, vocab, scale};
  ASSERT_EQ(kernels::LaunchEmbedding(p, nullptr), "");
  const auto got = out.Download();
  for (size_t t = 0; t < ids.size(); ++t) {
    for (int i = 0; i < hidden; ++i) {
      const float w = ToF(gpu_test::ToB(kernels::RandomFillValue(seed, int64_t(ids[t]) * hidden + i, 0, 0.02f)));
      ASSERT_EQ(got[t * hidden + i], w * scale) << "token " << t << " dim " << i;
    }
  }
}

TEST(GeluGateTest, MatchesTanhGelu) {
  GEMMA_REQUIRE_GPU();
  for (int tokens : {1, 3}) {
    const int inter = 21504;
    const auto in = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(tokens) * 2 * inter, 0, 2));
    DeviceArray<__nv_bfloat16> din(in), dout(size_t(tokens) * inter);
    dout.Poison();
    ASSERT_EQ(kernels::LaunchGeluGate({din.get(), dout.get(), tokens, inter}, nullptr), "");
    const auto got = gpu_test::ToFloat(dout.Download());
    std::vector<double> ref(got.size());
    for (int t = 0; t < tokens; ++t) {
      for (int i = 0; i < inter; ++i) {
        const double g = ToF(in[size_t(t) * 2 * inter + i]), u = ToF(in[size_t(t) * 2 * inter + inter + i]);
        ref[size_t(t) * inter + i] =
            0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * u;
      }
    }
    EXPECT_LT(gpu_test::RelErr(got, ref, 0, ref.size()), 8e-3);
  }
}

// An FP8 GEMM's unscaled sums in, with the column (weight row) and token
// scales that GEMM left (GeluGateParams::in_col_scale / in_token_scale):
// the same gate as on the scaled values, with and without the E4M3 output.
TEST(GeluGateTest, AppliesScalesLeftByTheGemm) {
  GEMMA_REQUIRE_GPU();
  const int tokens = 5, inter = 21504;
  const auto in = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(tokens) * 2 * inter, 0, 300));
  const auto col = gpu_test::RandomFloats(2 * inter, 0.05f, 0.01f);  // raw * col * tok ~ N(0, 1)
  const auto tok = gpu_test::RandomFloats(tokens, 0.07f, 0.01f);
  DeviceArray<__nv_bfloat16> din(in), dout(size_t(tokens) * inter);
  DeviceArray<float> dcol(col), dtok(tok), dscale(tokens);
  DeviceArray<uint8_t> dfp8(size_t(tokens) * inter);
  std::vector<double> ref(size_t(tokens) * inter);
  for (int t = 0; t < tokens; ++t) {
    for (int i = 0; i < inter; ++i) {
      const double g = ToF(in[size_t(t) * 2 * inter + i]) * double(col[i]) * tok[t];
      const double u = ToF(in[size_t(t) * 2 * inter + inter + i]) * double(col[inter + i]) * tok[t];
      ref[size_t(t) * inter + i] = 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * u;
    }
  }
  for (bool fp8 : {false, true}) {
    SCOPED_TRACE(fp8 ? "with E4M3 output" : "bf16 output");
    dout.Poison();
    kernels::GeluGateParams p{din.get(), dout.get(), tokens, inter};
    p.in_col_scale = dcol.get();
    p.in_token_scale = dtok.get();
    if (fp8) {
      p.out_fp8 = dfp8.get();
      p.out_scale = dscale.get();
    }
    ASSERT_EQ(kernels::LaunchGeluGate(p, nullptr), "");
    const auto got = gpu_test::ToFloat(dout.Download());
    EXPECT_LT(gpu_test::RelErr(got, ref, 0, ref.size()), 8e-3);
  }
  kernels::GeluGateParams bad{din.get(), dout.get(), tokens, inter};
  bad.in_col_scale = dcol.get();  // without the token scales
  EXPECT_NE(kernels::LaunchGeluGate(bad, nullptr), "");
}

TEST(GatherSoftcapTest, PicksRowsAndCaps) {
  GEMMA_REQUIRE_GPU();
  const int width = 5376, rows = 7;
  const auto src = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(rows) * width));
  const std::vector<int32_t> pick = {6, 0, 3};
  DeviceArray<__nv_bfloat16> dsrc(src), ddst(pick.size() * width);
  DeviceArray<int32_t> dpick(pick);
  ASSERT_EQ(kernels::LaunchGatherRows({dsrc.get(), dpick.get(), ddst.get(), 3, width}, nullptr), "");
  const auto got = gpu_test::ToFloat(ddst.Download());
  for (size_t r = 0; r < pick.size(); ++r)
    for (int i = 0; i < width; ++i) ASSERT_EQ(got[r * width + i], ToF(src[pick[r] * width + i]));

  const auto x = gpu_test::RandomFloats(100003, 0, 50);
  DeviceArray<float> dx(x);
  ASSERT_EQ(kernels::LaunchSoftcap({dx.get(), int64_t(x.size()), 30.0f}, nullptr), "");
  const auto capped = dx.Download();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(capped[i], 30.0 * std::tanh(x[i] / 30.0), 1e-4);
}

// torch.argmax's answer: the first index of the largest value; NaN never wins.
int HostArgmax(const std::vector<float>& logits, int row, int vocab) {
  int best = 0;
  for (int i = 1; i < vocab; ++i) {
    const float v = logits[size_t(row) * vocab + i], b = logits[size_t(row) * vocab + best];
    if (!std::isnan(v) && (std::isnan(b) || v > b)) best = i;
  }
  return best;
}

// One block per row (no workspace) and rows split over chunks (workspace),
// on vocabularies that take the vectorized and the scalar loads, with ties
// inside a chunk and across chunks, the maximum in the last element and a
// NaN. One workspace serves every launch, with 5, 2 and again 5 rows (as the
// decode graphs of different batch sizes share it): each launch must leave
// its rows' counts at zero for the next.
TEST(ArgmaxTest, FirstIndexOfMaximum) {
  GEMMA_REQUIRE_GPU();
  const int max_rows = 5;
  DeviceArray<uint8_t> workspace(std::vector<uint8_t>(kernels::ArgmaxWorkspaceBytes(max_rows), 0));
  for (const int vocab : {262144, 262147, 5003, 4096, 1}) {
    auto logits = gpu_test::RandomFloats(size_t(max_rows) * vocab);
    if (vocab > 9000) {
      logits[size_t(1) * vocab + 77] = 50.0f;  // a tie across chunks: the smaller index wins
      logits[size_t(1) * vocab + 9000] = 50.0f;
      logits[size_t(4) * vocab + 4101] = 40.0f;  // a tie inside one chunk
      logits[size_t(4) * vocab + 4100] = 40.0f;
    }
    logits[size_t(2) * vocab + vocab - 1] = 60.0f;  // last element
    logits[size_t(3) * vocab + vocab / 2] = NAN;    // NaN never wins
    DeviceArray<float> dl(logits);
    DeviceArray<int32_t> out(max_rows);
    struct Launch {
      void* ws;
      int rows;
    };
    for (const Launch l : {Launch{nullptr, max_rows}, Launch{workspace.get(), max_rows}, Launch{workspace.get(), 2},
                           Launch{workspace.get(), max_rows}}) {
      out.Poison();  // -1: an id the kernel did not write
      ASSERT_EQ(kernels::LaunchArgmax({dl.get(), out.get(), l.rows, vocab, l.ws}, nullptr), "");
      const auto got = out.Download();
      for (int r = 0; r < l.rows; ++r)
        EXPECT_EQ(got[r], HostArgmax(logits, r, vocab))
            << "vocab " << vocab << " row " << r << " of " << l.rows << " workspace " << l.ws;
    }
  }
}

TEST(RandomFillTest, DeviceMatchesHostTwinAndStatistics) {
  GEMMA_REQUIRE_GPU();
  const int64_t n = 1 << 20;
  DeviceArray<float> out(n);
  kernels::RandomFillParams p;
  p.out_f32 = out.get();
  p.count = n;
  p.seed = 42;
  p.mean = 1.0f;
  p.stddev = 0.1f;
  ASSERT_EQ(kernels::LaunchRandomFill(p, nullptr), "");
  const auto got = out.Download();
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], kernels::RandomFillValue(42, i, 1.0f, 0.1f));
    sum += got[i];
    sq += double(got[i]) * got[i];
  }
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 1.0, 1e-3);
  EXPECT_NEAR(sd, 0.1, 1e-3);
}

}  // namespace
}  // namespace gemma
