// LinearRunner with FP8 weights (issue 8): every path (GEMV for 1..8 rows,
// cuBLASLt FP8 above, with cuBLASLt's outer-vector scales and with the
// epilogue kernel) against a double reference computed from the E4M3 codes
// and scales the device produced, and fp8 vs bf16 weights on the same
// inputs (the quantization error itself, E4M3 with per-row/per-token scales),
// and x passed pre-quantized (x_fp8/x_scale) vs quantized by the runner.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/cuda/linear.h"
#include "kernels/attention/autotune.h"
#include "kernels/init/random_init.h"
#include "kernels/quant/fp8_quant.h"
#include "tests/gpu/gpu_test_util.h"

namespace gemma {
namespace {

using gpu_test::DeviceArray;

void CheckLinearFp8(int m, int n, int k, bool outer_vec) {
  SCOPED_TRACE(testing::Message() << "m=" << m << " n=" << n << " k=" << k << " outer_vec=" << outer_vec);
  setenv("GEMMA_FP8_OUTER_VEC", outer_vec ? "1" : "0", 1);
  auto runner = cuda::LinearRunner::Create(false, 0);
  ASSERT_TRUE(runner.ok()) << runner.status();
  ASSERT_TRUE((*runner)->ReserveFp8(m, k).ok());
  DeviceArray<__nv_bfloat16> w(size_t(n) * k);
  kernels::RandomFillParams rp;
  rp.out_bf16 = w.get();
  rp.count = int64_t(n) * k;
  rp.seed = gpu_test::Rng()();
  ASSERT_EQ(kernels::LaunchRandomFill(rp, nullptr), "");
  DeviceArray<uint8_t> w8(size_t(n) * k);
  DeviceArray<float> ws(n);
  ASSERT_EQ(kernels::LaunchQuantizeRowsFp8({w.get(), w8.get(), ws.get(), n, k}, nullptr), "");
  const auto xb = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(m) * k));
  DeviceArray<__nv_bfloat16> x(xb), out8(size_t(m) * n), out16(size_t(m) * n);
  out8.Poison();
  cuda::LinearArgs a;
  a.w = cuda::DeviceMatrix(w8.get(), ws.get());
  a.x = x.get();
  a.out_bf16 = out8.get();
  a.m = m;
  a.n = n;
  a.k = k;
  ASSERT_TRUE((*runner)->Run(a, nullptr).ok());
  a.w = cuda::DeviceMatrix(w.get());
  a.out_bf16 = out16.get();
  ASSERT_TRUE((*runner)->Run(a, nullptr).ok());
  CUDA_OK(cudaDeviceSynchronize());
  const auto got = gpu_test::ToFloat(out8.Download());
  const auto bf16 = gpu_test::ToFloat(out16.Download());
  // The reference quantizes x like the runner does (same kernel, checked in
  // gemv_fp8_test against the host), then sums in double.
  DeviceArray<uint8_t> x8(size_t(m) * k);
  DeviceArray<float> xs(m);
  ASSERT_EQ(kernels::LaunchQuantizeRowsFp8({x.get(), x8.get(), xs.get(), m, k}, nullptr), "");
  // x already quantized by its producer: the runner reads the codes as given.
  DeviceArray<__nv_bfloat16> out_pre(size_t(m) * n);
  out_pre.Poison();
  a.w = cuda::DeviceMatrix(w8.get(), ws.get());
  a.x = nullptr;
  a.x_fp8 = x8.get();
  a.x_scale = xs.get();
  a.out_bf16 = out_pre.get();
  ASSERT_TRUE((*runner)->Run(a, nullptr).ok());
  CUDA_OK(cudaDeviceSynchronize());
  const auto got_pre = gpu_test::ToFloat(out_pre.Download());
  EXPECT_LT(gpu_test::RelErr(got_pre, got, 0, got.size()), 1e-6);
  const auto wc = w8.Download(), xc = x8.Download();
  const auto wsc = ws.Download(), xsc = xs.Download();
  std::vector<double> ref, out, out_bf16;
  for (int i = 0; i < m; i += std::max(1, m / 16)) {
    for (int j = 0; j < n; j += std::max(1, n / 64)) {
      double acc = 0;
      for (int c = 0; c < k; ++c) {
        acc += double(kernels::Fp8E4M3ToFloat(wc[size_t(j) * k + c])) * kernels::Fp8E4M3ToFloat(xc[size_t(i) * k + c]);
      }
      ref.push_back(acc * wsc[j] * xsc[i]);
      out.push_back(got[size_t(i) * n + j]);
      out_bf16.push_back(bf16[size_t(i) * n + j]);
    }
  }
  EXPECT_LT(gpu_test::RelErr(out, ref, 0, ref.size()), 8e-3);
  // E4M3 rounding of w and x: ~2^-5.8 rms each, ~4 % on the product.
  const double vs_bf16 = gpu_test::RelErr(out, out_bf16, 0, out.size());
  std::printf("linear-fp8 m=%d n=%d k=%d outer_vec=%d: rel. error vs bf16 weights %.4f\n", m, n, k, outer_vec, vs_bf16);
  EXPECT_LT(vs_bf16, 0.08);
}

TEST(LinearFp8Test, GemvAndGemmPathsAgreeWithReference) {
  GEMMA_REQUIRE_GPU();
  for (bool outer_vec : {true, false}) {
    for (int m : {1, 8, 9, 64, 300}) CheckLinearFp8(m, 1040, 528, outer_vec);
    CheckLinearFp8(200, 5376, 21504, outer_vec);  // down_proj
    CheckLinearFp8(128, 43008, 5376, outer_vec);  // gate_up
  }
  unsetenv("GEMMA_FP8_OUTER_VEC");
}

// After autotuning, a GEMV-sized Run may take the bf16-input (a16) or the
// E4M3-input path, with x unquantized or pre-quantized: every choice must stay
// within activation-quantization error of fp8 weights times bf16 x.
TEST(LinearFp8Test, TunedGemvEitherInputPath) {
  GEMMA_REQUIRE_GPU();
  const int n = 5376, k = 8192;
  auto runner = cuda::LinearRunner::Create(false, 0);
  ASSERT_TRUE(runner.ok()) << runner.status();
  ASSERT_TRUE((*runner)->ReserveFp8(8, k).ok());
  DeviceArray<__nv_bfloat16> w(size_t(n) * k);
  kernels::RandomFillParams rp;
  rp.out_bf16 = w.get();
  rp.count = int64_t(n) * k;
  rp.seed = gpu_test::Rng()();
  ASSERT_EQ(kernels::LaunchRandomFill(rp, nullptr), "");
  DeviceArray<uint8_t> w8(size_t(n) * k);
  DeviceArray<float> ws(n);
  ASSERT_EQ(kernels::LaunchQuantizeRowsFp8({w.get(), w8.get(), ws.get(), n, k}, nullptr), "");
  const cuda::DeviceMatrix wm(w8.get(), ws.get());
  for (int m : {1, 3}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    const auto xb = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(m) * k));
    DeviceArray<__nv_bfloat16> x(xb);
    DeviceArray<float> scratch(size_t(m) * n);
    ASSERT_TRUE((*runner)->Autotune(n, k, m, wm, x.get(), scratch.get(), nullptr).ok());
    std::printf("%s\n", (*runner)->Fp8TuningSummary(m).c_str());
    DeviceArray<uint8_t> x8(size_t(m) * k);
    DeviceArray<float> xs(m);
    ASSERT_EQ(kernels::LaunchQuantizeRowsFp8({x.get(), x8.get(), xs.get(), m, k}, nullptr), "");
    const auto wc = w8.Download();
    const auto wsc = ws.Download();
    std::vector<double> ref;
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int c = 0; c < k; ++c) {
          acc += double(kernels::Fp8E4M3ToFloat(wc[size_t(j) * k + c])) * gpu_test::ToF(xb[size_t(i) * k + c]);
        }
        ref.push_back(acc * wsc[j]);
      }
    }
    for (bool pre_quantized : {false, true}) {
      DeviceArray<__nv_bfloat16> out(size_t(m) * n);
      out.Poison();
      cuda::LinearArgs a;
      a.w = wm;
      a.x = x.get();
      a.out_bf16 = out.get();
      a.m = m;
      a.n = n;
      a.k = k;
      if (pre_quantized) {
        a.x_fp8 = x8.get();
        a.x_scale = xs.get();
      }
      ASSERT_TRUE((*runner)->Run(a, nullptr).ok());
      CUDA_OK(cudaDeviceSynchronize());
      const auto got = gpu_test::ToFloat(out.Download());
      // E4M3 x: ~2^-5.8 rms rounding per element, ~2 % on a long dot product.
      EXPECT_LT(gpu_test::RelErr(got, ref, 0, ref.size()), 0.05) << "pre_quantized=" << pre_quantized;
    }
  }
}

}  // namespace
// A second runner takes the first one's tuned choice from the autotune cache
// (no timing) and computes the same bits with it.
TEST(LinearFp8Test, TunedChoiceComesBackFromTheCache) {
  GEMMA_REQUIRE_GPU();
  if (!kernels::attention::AutotuneCache::Get().enabled()) GTEST_SKIP() << "GEMMA_AUTOTUNE=0";
  const int n = 1040, k = 528, m = 2;
  DeviceArray<__nv_bfloat16> w(size_t(n) * k);
  kernels::RandomFillParams rp;
  rp.out_bf16 = w.get();
  rp.count = int64_t(n) * k;
  rp.seed = gpu_test::Rng()();
  ASSERT_EQ(kernels::LaunchRandomFill(rp, nullptr), "");
  DeviceArray<uint8_t> w8(size_t(n) * k);
  DeviceArray<float> ws(n);
  ASSERT_EQ(kernels::LaunchQuantizeRowsFp8({w.get(), w8.get(), ws.get(), n, k}, nullptr), "");
  const cuda::DeviceMatrix wm(w8.get(), ws.get());
  DeviceArray<__nv_bfloat16> x(gpu_test::ToBf16(gpu_test::RandomFloats(size_t(m) * k)));
  DeviceArray<float> scratch(size_t(m) * n);
  std::vector<std::vector<__nv_bfloat16>> outs;
  for (int r = 0; r < 2; ++r) {
    auto runner = cuda::LinearRunner::Create(false, 0);
    ASSERT_TRUE(runner.ok()) << runner.status();
    ASSERT_TRUE((*runner)->ReserveFp8(8, k).ok());
    ASSERT_TRUE((*runner)->Autotune(n, k, m, wm, x.get(), scratch.get(), nullptr).ok());
    if (r == 1) EXPECT_EQ((*runner)->cache_hits(), 1);
    DeviceArray<__nv_bfloat16> out(size_t(m) * n);
    out.Poison();
    cuda::LinearArgs a;
    a.w = wm;
    a.x = x.get();
    a.out_bf16 = out.get();
    a.m = m;
    a.n = n;
    a.k = k;
    ASSERT_TRUE((*runner)->Run(a, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    outs.push_back(out.Download());
  }
  ASSERT_EQ(outs[0].size(), outs[1].size());
  EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(__nv_bfloat16)), 0);
}

}  // namespace gemma
