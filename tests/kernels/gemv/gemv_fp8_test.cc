// FP8 weight path kernels vs CPU references: the per-row E4M3
// quantizer (scales, round trip error), the fp8 GEMV at the 31B shapes and
// odd ones (every tiling, E4M3 and bf16 (a16) activations, batch 1..8, bf16
// and fp32+softcap output), and the
// fp8 GEMM scale epilogue. The GEMV reference is computed in double from the
// quantized codes and scales the device produced, so it checks the kernel's
// fragment mapping exactly (fp32 accumulation error only).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/gemv/gemv_fp8.h"
#include "kernels/quant/fp8_quant.h"
#include "tests/common/fp8_test_util.h"
#include "tests/common/gpu_test_util.h"

namespace gemma {
namespace {

using gpu_test::DeviceArray;

using fp8_test::Decode;
using fp8_test::Fp8Matrix;
using fp8_test::kShapes;
using fp8_test::Shape;

void CheckGemvFp8(const Shape& s, const Fp8Matrix& m, int batch, int variant, bool f32_out, float softcap) {
  SCOPED_TRACE(testing::Message() << "n=" << s.n << " k=" << s.k << " batch=" << batch
                                  << " variant=" << kernels::GemvFp8VariantName(variant));
  const auto xb = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(batch) * s.k));
  DeviceArray<__nv_bfloat16> x(xb);
  DeviceArray<uint8_t> x8(size_t(batch) * s.k);
  DeviceArray<float> xs(batch);
  ASSERT_EQ(kernels::LaunchQuantizeRowsFp8({x.get(), x8.get(), xs.get(), batch, s.k}, nullptr), "");
  DeviceArray<float> out32(size_t(batch) * s.n);
  DeviceArray<__nv_bfloat16> out16(size_t(batch) * s.n);
  out32.Poison();
  out16.Poison();
  kernels::GemvFp8Params p;
  p.w = m.w8.get();
  p.w_scale = m.ws.get();
  const bool a16 = kernels::GemvFp8VariantTakesBf16(variant);
  if (a16) {
    p.x_bf16 = x.get();
  } else {
    p.x = x8.get();
    p.x_scale = xs.get();
  }
  if (f32_out) p.out_f32 = out32.get(); else p.out_bf16 = out16.get();
  p.n = s.n;
  p.k = s.k;
  p.batch = batch;
  p.softcap = softcap;
  p.variant = variant;
  ASSERT_EQ(kernels::LaunchGemvFp8(p, nullptr), "");
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = f32_out ? out32.Download() : gpu_test::ToFloat(out16.Download());
  const std::vector<uint8_t> xc = x8.Download();
  const std::vector<float> xsc = xs.Download();

  std::vector<int> rows;
  const bool all = int64_t(s.n) * s.k <= (1 << 22);
  for (int r = 0; r < s.n && all; ++r) rows.push_back(r);
  if (!all) {
    for (int i = 0; i < 48; ++i) rows.push_back(gpu_test::Rng()() % s.n);
    for (int r = std::max(0, s.n - 17); r < s.n; ++r) rows.push_back(r);
  }
  std::vector<double> ref, out;
  for (int r : rows) {
    for (int b = 0; b < batch; ++b) {
      double acc = 0;
      for (int c = 0; c < s.k; ++c) {
        const size_t xi = size_t(b) * s.k + c;
        acc += double(Decode(m.codes[size_t(r) * s.k + c])) * (a16 ? gpu_test::ToF(xb[xi]) : Decode(xc[xi]));
      }
      acc *= double(m.scales[r]) * (a16 ? 1.0f : xsc[b]);
      if (softcap > 0) acc = softcap * std::tanh(acc / softcap);
      ref.push_back(acc);
      out.push_back(got[size_t(b) * s.n + r]);
    }
  }
  const double tol = f32_out ? 1e-4 : 8e-3;
  EXPECT_LT(gpu_test::RelErr(out, ref, 0, ref.size()), tol);
}

TEST(QuantizeRowsFp8Test, ScalesAndRoundTrip) {
  GEMMA_REQUIRE_GPU();
  const int rows = 37, cols = 5376;
  std::vector<float> xf = gpu_test::RandomFloats(size_t(rows) * cols, 0.0f, 3.0f);
  for (int c = 0; c < cols; ++c) xf[size_t(5) * cols + c] = 0.0f;  // all-zero row: scale 1
  xf[size_t(7) * cols + 11] = 1e4f;                                 // an outlier sets its row's scale
  const auto xb = gpu_test::ToBf16(xf);
  DeviceArray<__nv_bfloat16> x(xb);
  DeviceArray<uint8_t> q(size_t(rows) * cols);
  DeviceArray<float> s(rows);
  ASSERT_EQ(kernels::LaunchQuantizeRowsFp8({x.get(), q.get(), s.get(), rows, cols}, nullptr), "");
  const auto codes = q.Download();
  const auto scales = s.Download();
  for (int r = 0; r < rows; ++r) {
    float amax = 0;
    for (int c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(gpu_test::ToF(xb[size_t(r) * cols + c])));
    const float want = amax > 0 ? amax / kernels::kFp8E4M3Max : 1.0f;
    ASSERT_NEAR(scales[r], want, 1e-6f * want) << "row " << r;
    for (int c = 0; c < cols; ++c) {
      const float v = gpu_test::ToF(xb[size_t(r) * cols + c]);
      const float back = kernels::Fp8E4M3ToFloat(codes[size_t(r) * cols + c]) * scales[r];
      // 3 mantissa bits: half-ulp relative error 2^-4; subnormals (below
      // 2^-6 * scale) have absolute spacing 2^-9 * scale.
      ASSERT_LE(std::fabs(back - v), std::fabs(v) / 16 + scales[r] * std::ldexp(1.0f, -10) + 1e-30f)
          << "row " << r << " col " << c << " value " << v;
    }
  }
}

TEST(GemvFp8Test, RealShapesEveryTilingBatchOneAndEight) {
  GEMMA_REQUIRE_GPU();
  for (const Shape& s : kShapes) {
    Fp8Matrix m(s, gpu_test::Rng()());
    for (int v = 0; v < kernels::NumGemvFp8Variants(); ++v) {
      CheckGemvFp8(s, m, 1, v, false, 0.0f);
      CheckGemvFp8(s, m, 8, v, false, 0.0f);
    }
    for (int b = 2; b <= 7; ++b) CheckGemvFp8(s, m, b, (b * 5) % kernels::NumGemvFp8Variants(), false, 0.0f);
    CheckGemvFp8(s, m, 3, -1, false, 0.0f);
  }
}

TEST(GemvFp8Test, Fp32OutputWithSoftcap) {
  GEMMA_REQUIRE_GPU();
  const Shape s{4099, 1040};
  Fp8Matrix m(s, 7);
  for (int b : {1, 4, 8}) CheckGemvFp8(s, m, b, -1, true, 30.0f);
  CheckGemvFp8(s, m, 5, 0, true, 0.0f);
  for (int v = 0; v < kernels::NumGemvFp8Variants(); ++v) {
    if (kernels::GemvFp8VariantTakesBf16(v)) CheckGemvFp8(s, m, 1, v, true, 30.0f);
  }
}

TEST(GemvFp8Test, RejectsBadShapes) {
  kernels::GemvFp8Params p;
  EXPECT_NE(kernels::LaunchGemvFp8(p, nullptr), "");
  uint8_t b = 0;
  float f = 0;
  p.w = p.x = &b;
  p.w_scale = p.x_scale = &f;
  p.variant = kernels::NumGemvFp8Variants() - 1;  // a16: needs x_bf16
  p.n = 16;
  p.k = 32;
  p.batch = 1;
  p.out_f32 = &f;
  EXPECT_NE(kernels::LaunchGemvFp8(p, nullptr).find("x_bf16"), std::string::npos);
  p.variant = -1;
  p.out_f32 = &f;
  p.n = 16;
  p.k = 24;  // not a multiple of 16
  p.batch = 1;
  EXPECT_NE(kernels::LaunchGemvFp8(p, nullptr).find("multiple of 16"), std::string::npos);
}

TEST(ScaleFp8GemmTest, AppliesRowAndColumnScales) {
  GEMMA_REQUIRE_GPU();
  const int m = 19, n = 300;
  const auto v = gpu_test::RandomFloats(size_t(m) * n);
  const auto ws = gpu_test::RandomFloats(n, 1.0f, 0.3f), ts = gpu_test::RandomFloats(m, 1.0f, 0.3f);
  DeviceArray<float> out(v), dws(ws), dts(ts);
  DeviceArray<__nv_bfloat16> out16(gpu_test::ToBf16(v));
  ASSERT_EQ(kernels::LaunchScaleFp8Gemm({nullptr, out.get(), dws.get(), dts.get(), m, n, 30.0f}, nullptr), "");
  ASSERT_EQ(kernels::LaunchScaleFp8Gemm({out16.get(), nullptr, dws.get(), dts.get(), m, n, 0.0f}, nullptr), "");
  const auto got = out.Download();
  const auto got16 = gpu_test::ToFloat(out16.Download());
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      const size_t o = size_t(i) * n + j;
      const double want = double(v[o]) * ws[j] * ts[i];
      ASSERT_NEAR(got[o], 30.0 * std::tanh(want / 30.0), 1e-4);
      ASSERT_NEAR(got16[o], gpu_test::ToF(gpu_test::ToB(v[o])) * ws[j] * ts[i], 1e-2 * std::fabs(want) + 1e-6);
    }
  }
}

}  // namespace
}  // namespace gemma
