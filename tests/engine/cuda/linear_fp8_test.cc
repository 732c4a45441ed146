// LinearDispatcher with FP8 weights: every path (GEMV for 1..8 rows,
// cuBLASLt FP8 above, with cuBLASLt's outer-vector scales and with the
// epilogue kernel) against a double reference computed from the E4M3 codes
// and scales the device produced, and fp8 vs bf16 weights on the same
// inputs (the quantization error itself, E4M3 with per-row/per-token scales),
// and x passed pre-quantized (x_fp8/x_scale) vs quantized by the dispatcher;
// the wgmma FP8 linear for decode batches 1..WgmmaPath::kMaxM once tuned
// (forced, cached, switched off), and its cache lines' validation (host
// only, runs without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/cuda/common/launch_timer.h"
#include "engine/cuda/linear/linear.h"
#include "engine/cuda/linear/wgmma_path.h"
#include "kernels/attention/autotune.h"
#include "kernels/gemv/gemv_fp8.h"
#include "kernels/gemv/wgmma_fp8.h"
#include "kernels/init/random_init.h"
#include "kernels/quant/fp8_quant.h"
#include "tests/common/fp8_test_util.h"
#include "tests/common/gpu_test_util.h"

namespace gemma {
namespace {

using gpu_test::DeviceArray;

// Random bf16 weights [n, k] and their per-row E4M3 quantization.
struct RandomFp8Weights {
  RandomFp8Weights(int n, int k) : w(size_t(n) * k), w8(size_t(n) * k), ws(n) {
    kernels::RandomFillParams rp;
    rp.out_bf16 = w.get();
    rp.count = int64_t(n) * k;
    rp.seed = gpu_test::Rng()();
    EXPECT_EQ(kernels::LaunchRandomFill(rp, nullptr), "");
    EXPECT_EQ(kernels::LaunchQuantizeRowsFp8({w.get(), w8.get(), ws.get(), n, k}, nullptr), "");
  }
  cuda::DeviceMatrix fp8() const { return cuda::DeviceMatrix(w8.get(), ws.get()); }
  DeviceArray<__nv_bfloat16> w;
  DeviceArray<uint8_t> w8;
  DeviceArray<float> ws;
};

void CheckLinearFp8(int m, int n, int k, bool outer_vec) {
  SCOPED_TRACE(testing::Message() << "m=" << m << " n=" << n << " k=" << k << " outer_vec=" << outer_vec);
  setenv("GEMMA_FP8_OUTER_VEC", outer_vec ? "1" : "0", 1);
  cuda::Tuner tuner(cuda::TuningSwitches::FromEnv());
  auto dispatcher = cuda::LinearDispatcher::Create(&tuner, false, 0);
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
  ASSERT_TRUE((*dispatcher)->ReserveFp8(m, k).ok());
  const RandomFp8Weights weights(n, k);
  const auto xb = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(m) * k));
  DeviceArray<__nv_bfloat16> x(xb), out8(size_t(m) * n), out16(size_t(m) * n);
  out8.Poison();
  cuda::LinearArgs a{weights.fp8(), x.get(), out8.get(), nullptr, m, n, k};
  ASSERT_TRUE((*dispatcher)->Run(a, nullptr).ok());
  a.w = cuda::DeviceMatrix(weights.w.get());
  a.out_bf16 = out16.get();
  ASSERT_TRUE((*dispatcher)->Run(a, nullptr).ok());
  CUDA_OK(cudaDeviceSynchronize());
  const auto got = gpu_test::ToFloat(out8.Download());
  const auto bf16 = gpu_test::ToFloat(out16.Download());
  // The reference quantizes x like the dispatcher does (same kernel, checked in
  // gemv_fp8_test against the host), then sums in double.
  DeviceArray<uint8_t> x8(size_t(m) * k);
  DeviceArray<float> xs(m);
  ASSERT_EQ(kernels::LaunchQuantizeRowsFp8({x.get(), x8.get(), xs.get(), m, k}, nullptr), "");
  // x already quantized by its producer: the dispatcher reads the codes as given.
  DeviceArray<__nv_bfloat16> out_pre(size_t(m) * n);
  out_pre.Poison();
  a.w = weights.fp8();
  a.x = nullptr;
  a.x_fp8 = x8.get();
  a.x_scale = xs.get();
  a.out_bf16 = out_pre.get();
  ASSERT_TRUE((*dispatcher)->Run(a, nullptr).ok());
  CUDA_OK(cudaDeviceSynchronize());
  const auto got_pre = gpu_test::ToFloat(out_pre.Download());
  EXPECT_LT(gpu_test::RelErr(got_pre, got, 0, got.size()), 1e-6);
  const auto wc = weights.w8.Download(), xc = x8.Download();
  const auto wsc = weights.ws.Download(), xsc = xs.Download();
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

// Run's `left`: where cuBLASLt's scalar-mode FP8 GEMM would scale its sums
// in an epilogue kernel (9..128 rows), it leaves them unscaled and hands the
// weight and token scales back; scaling them as that epilogue does gives the
// epilogue's bits. Where the path applies them itself (the GEMV at 8 rows)
// `left` comes back empty and the output is the usual one. (From 129 rows
// cuBLASLt's outer-vector mode, where it has one, scales in the GEMM.)
TEST(LinearFp8Test, ScalesLeftToTheConsumer) {
  GEMMA_REQUIRE_GPU();
  cuda::Tuner tuner(cuda::TuningSwitches::FromEnv());
  auto dispatcher = cuda::LinearDispatcher::Create(&tuner, false, 0);
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
  const int n = 1040, k = 528;
  ASSERT_TRUE((*dispatcher)->ReserveFp8(128, k).ok());
  const RandomFp8Weights weights(n, k);
  for (int m : {8, 16, 64, 128}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    const auto xb = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(m) * k));
    DeviceArray<__nv_bfloat16> x(xb), scaled(size_t(m) * n), unscaled(size_t(m) * n);
    cuda::LinearArgs a{weights.fp8(), x.get(), scaled.get(), nullptr, m, n, k};
    cuda::LeftScales left{weights.ws.get(), weights.ws.get()};  // Run must reset it
    ASSERT_TRUE((*dispatcher)->Run(a, nullptr, nullptr).ok());
    CUDA_OK(cudaDeviceSynchronize());
    const auto want = scaled.Download();
    a.out_bf16 = unscaled.get();
    ASSERT_TRUE((*dispatcher)->Run(a, nullptr, &left).ok());
    CUDA_OK(cudaDeviceSynchronize());
    const auto got = unscaled.Download();
    const bool epilogue = m > kernels::kGemvMaxBatch;  // and at most 128: cuBLASLt's scalar mode
    ASSERT_EQ(left.col != nullptr, epilogue);
    ASSERT_EQ(left.token != nullptr, epilogue);
    if (!epilogue) {
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(gpu_test::ToF(got[i]), gpu_test::ToF(want[i])) << i;
      continue;
    }
    EXPECT_EQ(left.col, weights.ws.get());
    std::vector<float> col(n), tok(m);
    CUDA_OK(cudaMemcpy(col.data(), left.col, n * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(tok.data(), left.token, m * 4, cudaMemcpyDeviceToHost));
    int differ = 0;
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        const float v = gpu_test::ToF(got[size_t(i) * n + j]) * (col[j] * tok[i]);
        differ += gpu_test::ToF(gpu_test::ToB(v)) != gpu_test::ToF(want[size_t(i) * n + j]);
      }
    }
    EXPECT_EQ(differ, 0);
  }
}

// Double reference of E4M3 weights (with their row scales) times bf16 x.
std::vector<double> Fp8WeightsTimesBf16(const std::vector<uint8_t>& codes, const std::vector<float>& scales,
                                        const std::vector<__nv_bfloat16>& xb, int m, int n, int k) {
  std::vector<double> ref;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int c = 0; c < k; ++c) {
        acc += double(kernels::Fp8E4M3ToFloat(codes[size_t(j) * k + c])) * gpu_test::ToF(xb[size_t(i) * k + c]);
      }
      ref.push_back(acc * scales[j]);
    }
  }
  return ref;
}

// After autotuning, a GEMV-sized Run may take the bf16-input (a16) or the
// E4M3-input path, with x unquantized or pre-quantized: every choice must stay
// within activation-quantization error of fp8 weights times bf16 x.
TEST(LinearFp8Test, TunedGemvEitherInputPath) {
  GEMMA_REQUIRE_GPU();
  const int n = 5376, k = 8192;
  cuda::Tuner tuner(cuda::TuningSwitches::FromEnv());
  auto dispatcher = cuda::LinearDispatcher::Create(&tuner, false, 0);
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
  ASSERT_TRUE((*dispatcher)->ReserveFp8(8, k).ok());
  const RandomFp8Weights weights(n, k);
  const cuda::DeviceMatrix wm = weights.fp8();
  for (int m : {1, 3}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    const auto xb = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(m) * k));
    DeviceArray<__nv_bfloat16> x(xb);
    DeviceArray<float> scratch(size_t(m) * n);
    ASSERT_TRUE((*dispatcher)->Autotune(n, k, m, wm, x.get(), scratch.get(), nullptr).ok());
    std::printf("%s\n", (*dispatcher)->Fp8TuningSummary(m).c_str());
    DeviceArray<uint8_t> x8(size_t(m) * k);
    DeviceArray<float> xs(m);
    ASSERT_EQ(kernels::LaunchQuantizeRowsFp8({x.get(), x8.get(), xs.get(), m, k}, nullptr), "");
    const std::vector<double> ref = Fp8WeightsTimesBf16(weights.w8.Download(), weights.ws.Download(), xb, m, n, k);
    for (bool pre_quantized : {false, true}) {
      DeviceArray<__nv_bfloat16> out(size_t(m) * n);
      out.Poison();
      cuda::LinearArgs a{wm, x.get(), out.get(), nullptr, m, n, k};
      if (pre_quantized) {
        a.x_fp8 = x8.get();
        a.x_scale = xs.get();
      }
      ASSERT_TRUE((*dispatcher)->Run(a, nullptr).ok());
      CUDA_OK(cudaDeviceSynchronize());
      const auto got = gpu_test::ToFloat(out.Download());
      // E4M3 x: ~2^-5.8 rms rounding per element, ~2 % on a long dot product.
      EXPECT_LT(gpu_test::RelErr(got, ref, 0, ref.size()), 0.05) << "pre_quantized=" << pre_quantized;
    }
  }
}

// The tuned choice comes back from the autotune cache: a first dispatcher on a
// shape no earlier run tuned (random n) times it, a second takes it without
// timing and computes the same bits, and a cache line naming tilings of the
// wrong input families is ignored (re-timed) instead of being launched.
TEST(LinearFp8Test, TunedChoiceComesBackFromTheCache) {
  GEMMA_REQUIRE_GPU();
  if (!kernels::attention::AutotuneCache::Get().enabled()) GTEST_SKIP() << "GEMMA_AUTOTUNE=0";
  const int n = 1040 + 16 * int(gpu_test::Rng()() % 4096), k = 528, m = 2;
  SCOPED_TRACE(testing::Message() << "n=" << n);
  const RandomFp8Weights weights(n, k);
  const cuda::DeviceMatrix wm = weights.fp8();
  const auto xb = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(m) * k));
  DeviceArray<__nv_bfloat16> x(xb);
  DeviceArray<float> scratch(size_t(m) * n);
  const std::vector<double> ref = Fp8WeightsTimesBf16(weights.w8.Download(), weights.ws.Download(), xb, m, n, k);
  // Tunes (n, k, m) on a fresh dispatcher; returns its output and cache hits.
  auto tune_and_run = [&](std::vector<__nv_bfloat16>* out_host, int* hits, std::string* key) {
    cuda::Tuner tuner(cuda::TuningSwitches::FromEnv());
    auto dispatcher = cuda::LinearDispatcher::Create(&tuner, false, 0);
    ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
    ASSERT_TRUE((*dispatcher)->ReserveFp8(8, k).ok());
    ASSERT_TRUE((*dispatcher)->Autotune(n, k, m, wm, x.get(), scratch.get(), nullptr).ok());
    *hits = (*dispatcher)->cache_hits();
    *key = (*dispatcher)->GemvCacheKey(true, n, k, m);
    DeviceArray<__nv_bfloat16> out(size_t(m) * n);
    out.Poison();
    const cuda::LinearArgs a{wm, x.get(), out.get(), nullptr, m, n, k};
    ASSERT_TRUE((*dispatcher)->Run(a, nullptr).ok());
    CUDA_OK(cudaDeviceSynchronize());
    *out_host = out.Download();
    EXPECT_LT(gpu_test::RelErr(gpu_test::ToFloat(*out_host), ref, 0, ref.size()), 0.05);
  };
  std::vector<__nv_bfloat16> first, second, third;
  int hits = -1;
  std::string key;
  tune_and_run(&first, &hits, &key);
  EXPECT_EQ(hits, 0);
  tune_and_run(&second, &hits, &key);
  EXPECT_EQ(hits, 1);
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(__nv_bfloat16)), 0);
  // Families swapped (an a16 tiling where the E4M3 one belongs), then junk.
  const char* a16_name = nullptr;
  const char* e4m3_name = nullptr;
  for (int v = 0; v < kernels::NumGemvFp8Variants(); ++v) {
    (kernels::GemvFp8VariantTakesBf16(v) ? a16_name : e4m3_name) = kernels::GemvFp8VariantName(v);
  }
  ASSERT_NE(a16_name, nullptr);
  ASSERT_NE(e4m3_name, nullptr);
  for (const std::string& bad : {std::string(a16_name) + " 1000 " + e4m3_name + " 1000 1000", std::string("junk")}) {
    SCOPED_TRACE(bad);
    kernels::attention::AutotuneCache::Get().Store(key, bad);
    tune_and_run(&third, &hits, &key);
    EXPECT_EQ(hits, 0);
  }
}

// ---- the wgmma FP8 linear (decode batches 1..WgmmaPath::kMaxM) ----

// An fp8 matrix with the TMA descriptor DeviceWeights gives it at load.
struct WgmmaWeights {
  WgmmaWeights(int n, int k) : n(n), k(k), m({n, k}, gpu_test::Rng()()) {
    EXPECT_EQ(kernels::MakeWgmmaFp8Weights(m.w8.get(), n, k, &map), "");
  }
  cuda::DeviceMatrix matrix() const { return cuda::DeviceMatrix(m.w8.get(), m.ws.get(), &map); }
  int n, k;
  fp8_test::Fp8Matrix m;
  kernels::WgmmaFp8Weights map;
};

// A dispatcher with the fp8 and wgmma scratch for w at up to 64 rows, tuned
// for w's shape (fp32 out + softcap when softcap > 0, as the LM head;
// `codes_given`: decode would pass x already quantized).
// The dispatcher with the tuner that holds its choices.
struct TunedDispatcher {
  std::unique_ptr<cuda::Tuner> tuner;
  std::unique_ptr<cuda::LinearDispatcher> dispatcher;
  cuda::LinearDispatcher* operator->() const { return dispatcher.get(); }
  cuda::LinearDispatcher& operator*() const { return *dispatcher; }
  bool operator==(std::nullptr_t) const { return dispatcher == nullptr; }
};

TunedDispatcher TunedWgmmaDispatcher(const WgmmaWeights& w, float softcap, bool codes_given = true) {
  auto tuner = std::make_unique<cuda::Tuner>(cuda::TuningSwitches::FromEnv());
  auto dispatcher = cuda::LinearDispatcher::Create(tuner.get(), false, 0);
  EXPECT_TRUE(dispatcher.ok()) << dispatcher.status();
  if (!dispatcher.ok()) return {};
  EXPECT_TRUE((*dispatcher)->ReserveFp8(64, w.k).ok());
  EXPECT_TRUE((*dispatcher)->ReserveWgmmaFp8(w.n).ok());
  const cuda::DeviceMatrix mats[] = {w.matrix()};
  const absl::Status st =
      (*dispatcher)->AutotuneWgmmaFp8(mats, w.n, w.k, 64, softcap > 0.0f, softcap, codes_given, false, nullptr);
  EXPECT_TRUE(st.ok()) << st;
  return {std::move(tuner), std::move(*dispatcher)};
}

// Runs w at m random rows (bf16 out, or fp32 with `softcap`) and checks the
// sampled outputs against the double reference over the E4M3 codes, within
// the cuBLASLt tolerance above. Returns the output's bytes.
std::vector<uint8_t> RunWgmmaChecked(cuda::LinearDispatcher& dispatcher, const WgmmaWeights& w, int m, float softcap) {
  const int n = w.n, k = w.k;
  const bool f32 = softcap > 0.0f;
  SCOPED_TRACE(testing::Message() << "m=" << m << " n=" << n << " k=" << k << " f32=" << f32 << " kernel "
                                  << dispatcher.Fp8GemmFor(w.matrix(), n, k, m));
  const auto xb = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(m) * k));
  DeviceArray<__nv_bfloat16> x(xb);
  DeviceArray<uint8_t> out(size_t(m) * n * (f32 ? 4 : 2));
  out.Poison();
  const cuda::LinearArgs a{w.matrix(), x.get(), f32 ? nullptr : reinterpret_cast<__nv_bfloat16*>(out.get()),
                           f32 ? reinterpret_cast<float*>(out.get()) : nullptr, m, n, k, softcap};
  EXPECT_TRUE(dispatcher.Run(a, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint8_t> bytes = out.Download();
  // The dispatcher quantizes x with this kernel (checked against the host in
  // gemv_fp8_test); the reference sums its codes in double.
  DeviceArray<uint8_t> x8(size_t(m) * k);
  DeviceArray<float> xs(m);
  EXPECT_EQ(kernels::LaunchQuantizeRowsFp8({x.get(), x8.get(), xs.get(), m, k}, nullptr), "");
  const auto xc = x8.Download();
  const auto xsc = xs.Download();
  std::vector<double> ref, got;
  for (int i = 0; i < m; i += std::max(1, m / 16)) {
    for (int j = 0; j < n; j += std::max(1, n / 64)) {
      double acc = 0;
      for (int c = 0; c < k; ++c) {
        acc += double(fp8_test::Decode(w.m.codes[size_t(j) * k + c])) * fp8_test::Decode(xc[size_t(i) * k + c]);
      }
      acc *= double(w.m.scales[j]) * xsc[i];
      ref.push_back(f32 ? softcap * std::tanh(acc / softcap) : acc);
      const size_t o = size_t(i) * n + j;
      if (f32) {
        float v;
        std::memcpy(&v, bytes.data() + 4 * o, 4);
        got.push_back(v);
      } else {
        __nv_bfloat16 v;
        std::memcpy(&v, bytes.data() + 2 * o, 2);
        got.push_back(gpu_test::ToF(v));
      }
    }
  }
  EXPECT_LT(gpu_test::RelErr(got, ref, 0, ref.size()), 8e-3);
  return bytes;
}

// Tuned, then forced onto the wgmma choice (whatever the GEMV or cuBLASLt
// measured): m = 1, 5, 16, 32 and 64 are buckets, 24 and 48 take the next
// bucket's choice.
// The LM-head-like shape is tuned as decode runs it: from bf16 x (the wgmma
// side quantizes first). The o_proj
// shape (42 row tiles: split-K candidates) with bf16 out, and an LM-head-like
// one (rows not a multiple of a tile) with fp32 out and softcap.
TEST(LinearFp8Test, WgmmaAfterAutotuneAgreesWithReference) {
  GEMMA_REQUIRE_GPU();
  for (const auto& [n, k, softcap] : {std::tuple{5376, 8192, 0.0f}, std::tuple{16400, 5376, 30.0f}}) {
    const WgmmaWeights w(n, k);
    auto dispatcher = TunedWgmmaDispatcher(w, softcap, softcap == 0.0f);
    ASSERT_NE(dispatcher, nullptr);
    for (int m : {1, 5, 16, 24, 32, 48, 64}) {
      std::printf("linear-fp8 %d x %d m=%d measured: %s\n", n, k, m, dispatcher->Fp8GemmFor(w.matrix(), n, k, m).c_str());
    }
    dispatcher->set_wgmma_preference(cuda::WgmmaPreference::kForce);
    for (int m : {1, 5, 16, 24, 32, 48, 64}) {
      const std::string kernel = dispatcher->Fp8GemmFor(w.matrix(), n, k, m);
      EXPECT_NE(kernel, "cuBLASLt") << "m=" << m;
      EXPECT_NE(kernel, "GEMV") << "m=" << m;
      // GEMV batches: 16-token tiles that keep fp32 accumulation only.
      if (m <= kernels::kGemvMaxBatch) {
        EXPECT_EQ(kernel.rfind("wgp-n16", 0), 0u) << kernel;
      }
      RunWgmmaChecked(*dispatcher, w, m, softcap);
    }
    // Past kMaxM, and without a descriptor: never wgmma.
    static_assert(cuda::WgmmaPath::kMaxM == 64);
    EXPECT_EQ(dispatcher->Fp8GemmFor(w.matrix(), n, k, 65), "cuBLASLt");
    EXPECT_EQ(dispatcher->Fp8GemmFor(w.matrix(), n, k, 128), "cuBLASLt");
    EXPECT_EQ(dispatcher->Fp8GemmFor(cuda::DeviceMatrix(w.m.w8.get(), w.m.ws.get()), n, k, 16), "cuBLASLt");
    EXPECT_EQ(dispatcher->Fp8GemmFor(cuda::DeviceMatrix(w.m.w8.get(), w.m.ws.get()), n, k, 1), "GEMV");
  }
}

// A second dispatcher takes the tuned choices from the cache (one hit per
// bucket) and computes the same bits; lines that name no runnable choice
// are re-timed instead of launched.
TEST(LinearFp8Test, WgmmaChoiceComesBackFromTheCache) {
  GEMMA_REQUIRE_GPU();
  if (!kernels::attention::AutotuneCache::Get().enabled()) GTEST_SKIP() << "GEMMA_AUTOTUNE=0";
  // A shape no earlier run tuned.
  const WgmmaWeights w(1040 + 16 * int(gpu_test::Rng()() % 4096), 528);
  SCOPED_TRACE(testing::Message() << "n=" << w.n);
  auto first = TunedWgmmaDispatcher(w, 0.0f);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->cache_hits(), 0);
  first->set_wgmma_preference(cuda::WgmmaPreference::kForce);
  auto second = TunedWgmmaDispatcher(w, 0.0f);
  ASSERT_NE(second, nullptr);
  const std::vector<int> buckets = cuda::WgmmaPath::Buckets(64);
  EXPECT_EQ(second->cache_hits(), static_cast<int>(buckets.size()));
  second->set_wgmma_preference(cuda::WgmmaPreference::kForce);
  for (int m : buckets) {
    EXPECT_EQ(first->Fp8GemmFor(w.matrix(), w.n, w.k, m), second->Fp8GemmFor(w.matrix(), w.n, w.k, m));
  }
  // Same input twice: RunWgmmaChecked draws x from a seeded stream.
  const uint64_t seed = gpu_test::Rng()();
  gpu_test::Rng().seed(seed);
  const auto a = RunWgmmaChecked(*first, w, 24, 0.0f);
  gpu_test::Rng().seed(seed);
  const auto b = RunWgmmaChecked(*second, w, 24, 0.0f);
  EXPECT_TRUE(a == b) << "the cached choice computed other bits";
  // The GEMV buckets' keys differ from the others' (another baseline), and
  // by whether decode quantizes x before them.
  EXPECT_NE(first->WgmmaCacheKey(w.n, w.k, 1).find("/gemv"), std::string::npos);
  EXPECT_NE(first->WgmmaCacheKey(w.n, w.k, 1), first->WgmmaCacheKey(w.n, w.k, 1, false));
  EXPECT_NE(first->WgmmaCacheKey(w.n, w.k, 16).find("/lt"), std::string::npos);
  for (int bucket : buckets) {
    kernels::attention::AutotuneCache::Get().Store(first->WgmmaCacheKey(w.n, w.k, bucket), "junk");
  }
  auto third = TunedWgmmaDispatcher(w, 0.0f);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->cache_hits(), 0);
}

// GEMMA_FP8_WGMMA=0: nothing tuned, the GEMV and cuBLASLt compute every batch.
TEST(LinearFp8Test, WgmmaSwitchedOffKeepsGemvAndCublasLt) {
  GEMMA_REQUIRE_GPU();
  setenv("GEMMA_FP8_WGMMA", "0", 1);
  const WgmmaWeights w(1040, 528);
  auto dispatcher = TunedWgmmaDispatcher(w, 0.0f);
  unsetenv("GEMMA_FP8_WGMMA");
  ASSERT_NE(dispatcher, nullptr);
  EXPECT_EQ(dispatcher->cache_hits(), 0);
  for (int m : {1, 8, 16, 40, 64}) {
    EXPECT_EQ(dispatcher->Fp8GemmFor(w.matrix(), w.n, w.k, m), m <= kernels::kGemvMaxBatch ? "GEMV" : "cuBLASLt");
    RunWgmmaChecked(*dispatcher, w, m, 0.0f);
  }
}

// Host only: the cache line of a choice round-trips, and lines naming what
// this build would not run at the bucket are rejected.
TEST(LinearFp8Test, WgmmaCacheEntriesAreValidated) {
  int promoted64 = -1, fast16 = -1, narrow16 = -1;
  for (int v = 0; v < kernels::NumWgmmaFp8Variants(); ++v) {
    const int tile = kernels::WgmmaFp8VariantMaxM(v);
    const bool promotes = kernels::WgmmaFp8VariantPromotes(v);
    if (tile == 64 && promotes && promoted64 < 0) promoted64 = v;
    if (tile >= 16 && !promotes && fast16 < 0) fast16 = v;
    if (tile == 16 && narrow16 < 0) narrow16 = v;
  }
  ASSERT_GE(promoted64, 0);
  ASSERT_GE(fast16, 0);
  ASSERT_GE(narrow16, 0);
  for (const cuda::WgmmaChoice& c :
       {cuda::WgmmaChoice{.variant = promoted64, .splits = 4, .wgmma_ms = cuda::RoundToNs(0.0123f),
                          .baseline_ms = cuda::RoundToNs(0.02f)},
        cuda::WgmmaChoice{.variant = promoted64, .streamk_per_sm = 2, .wgmma_ms = cuda::RoundToNs(0.0099f),
                          .baseline_ms = cuda::RoundToNs(0.02f)}}) {
    const std::string line = cuda::FormatWgmmaCacheEntry(c);
    for (bool fast : {true, false}) {
      const auto back = cuda::ParseWgmmaCacheEntry(line, 64, fast);
      ASSERT_TRUE(back.has_value()) << line;
      EXPECT_EQ(back->variant, c.variant);
      EXPECT_EQ(back->splits, c.splits);
      EXPECT_EQ(back->streamk_per_sm, c.streamk_per_sm);
      EXPECT_EQ(back->wgmma_ms, c.wgmma_ms);
      EXPECT_EQ(back->baseline_ms, c.baseline_ms);
    }
  }
  const auto none = cuda::ParseWgmmaCacheEntry("- 1 0 0 20000", 16, true);
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->variant, -1);
  const std::string fast_name = kernels::WgmmaFp8VariantName(fast16);
  EXPECT_TRUE(cuda::ParseWgmmaCacheEntry(fast_name + " 1 0 100 200", 16, true).has_value());
  const std::string narrow_name = kernels::WgmmaFp8VariantName(narrow16);
  const std::string promoted_name = kernels::WgmmaFp8VariantName(promoted64);
  for (const std::string& bad :
       {std::string("junk"), promoted_name + " 4 0 100", promoted_name + " 4 0 100 200 7",
        promoted_name + " 4 100 200", std::string("nosuch-n16 1 0 100 200"), promoted_name + " 0 0 100 200",
        promoted_name + " 17 0 100 200", promoted_name + " 4 0 -1 200", promoted_name + " 4 0 100 -5",
        promoted_name + " x 0 100 200", narrow_name + " 1 0 100 200", promoted_name + " 1 -1 100 200",
        promoted_name + " 1 3 100 200", promoted_name + " 2 1 100 200"}) {
    EXPECT_FALSE(cuda::ParseWgmmaCacheEntry(bad, 32, true).has_value()) << bad;
  }
  // Fast accumulation off, or a GEMV batch: only the promoting variants.
  EXPECT_FALSE(cuda::ParseWgmmaCacheEntry(fast_name + " 1 0 100 200", 16, false).has_value());
  EXPECT_FALSE(cuda::ParseWgmmaCacheEntry(fast_name + " 1 0 100 200", 1, true).has_value());
  int promoted16 = -1;
  for (int v = 0; v < kernels::NumWgmmaFp8Variants(); ++v) {
    if (kernels::WgmmaFp8VariantMaxM(v) == 16 && kernels::WgmmaFp8VariantPromotes(v)) promoted16 = v;
  }
  ASSERT_GE(promoted16, 0);
  EXPECT_TRUE(cuda::ParseWgmmaCacheEntry(std::string(kernels::WgmmaFp8VariantName(promoted16)) + " 1 1 100 200",
                                         kernels::kGemvMaxBatch, true)
                  .has_value());
}

TEST(LinearFp8Test, WgmmaBucketsFollowTheDecodeBatches) {
  using V = std::vector<int>;
  static_assert(kernels::kGemvMaxBatch == 8, "the GEMV batches below");
  const V gemv{1, 2, 3, 4, 5, 6, 7, 8};
  auto with = [&](V above) {
    V all = gemv;
    all.insert(all.end(), above.begin(), above.end());
    return all;
  };
  EXPECT_EQ(cuda::WgmmaPath::Buckets(64), with({16, 32, 64}));
  EXPECT_EQ(cuda::WgmmaPath::Buckets(256), with({16, 32, 64}));
  EXPECT_EQ(cuda::WgmmaPath::Buckets(40), with({16, 32, 40}));
  EXPECT_EQ(cuda::WgmmaPath::Buckets(20), with({16, 20}));
  EXPECT_EQ(cuda::WgmmaPath::Buckets(12), with({12}));
  EXPECT_EQ(cuda::WgmmaPath::Buckets(kernels::kGemvMaxBatch), gemv);
  EXPECT_EQ(cuda::WgmmaPath::Buckets(3), (V{1, 2, 3}));
}

}  // namespace
}  // namespace gemma
