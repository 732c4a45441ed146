// GEMV (decode linear) vs a CPU double-precision reference at the 31B shapes,
// every tiling variant, batch 1..8, and shapes that are not a multiple of the
// block. Large weights are generated on the device by the random-init kernel
// and reproduced on the host by its twin, so only sampled rows are checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <vector>
#include <tuple>

#include "kernels/gemv/gemv.h"
#include "kernels/init/random_init.h"
#include "tests/common/gpu_test_util.h"

namespace gemma {
namespace {

using gpu_test::DeviceArray;

struct Shape {
  int n, k;
};

// 31B: QKV sliding / global, o_proj sliding / global, gate|up, down, lm_head;
// plus odd shapes (rows not a multiple of a block, k not a multiple of 256).
const Shape kShapes[] = {{16384, 5376}, {18432, 5376}, {5376, 8192}, {5376, 16384}, {43008, 5376},
                         {5376, 21504}, {262144, 5376}, {1000, 520}, {7, 8}, {33, 264}};

void CheckGemv(const Shape& s, int batch, int variant, bool f32_out, float softcap) {
  SCOPED_TRACE(testing::Message() << "n=" << s.n << " k=" << s.k << " batch=" << batch
                                  << " variant=" << kernels::GemvVariantName(variant));
  const uint64_t seed = gpu_test::Rng()();
  DeviceArray<__nv_bfloat16> w(static_cast<size_t>(s.n) * s.k);
  kernels::RandomFillParams rp;
  rp.out_bf16 = w.get();
  rp.count = static_cast<int64_t>(s.n) * s.k;
  rp.seed = seed;
  rp.stddev = 0.02f;
  ASSERT_EQ(kernels::LaunchRandomFill(rp, nullptr), "");
  const std::vector<float> xf = gpu_test::RandomFloats(static_cast<size_t>(batch) * s.k);
  const auto xb = gpu_test::ToBf16(xf);
  DeviceArray<__nv_bfloat16> x(xb);
  DeviceArray<float> out32(static_cast<size_t>(batch) * s.n);
  DeviceArray<__nv_bfloat16> out16(static_cast<size_t>(batch) * s.n);
  out32.Poison();
  out16.Poison();
  kernels::GemvParams p;
  p.w = w.get();
  p.x = x.get();
  if (f32_out) p.out_f32 = out32.get(); else p.out_bf16 = out16.get();
  p.n = s.n;
  p.k = s.k;
  p.batch = batch;
  p.softcap = softcap;
  p.variant = variant;
  ASSERT_EQ(kernels::LaunchGemv(p, nullptr), "");
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> got(static_cast<size_t>(batch) * s.n);
  if (f32_out) got = out32.Download(); else got = gpu_test::ToFloat(out16.Download());

  // Every row when cheap, else a random sample that includes the last rows.
  std::vector<int> rows;
  const bool all = static_cast<int64_t>(s.n) * s.k <= (1 << 22);
  for (int r = 0; r < s.n; ++r) if (all) rows.push_back(r);
  if (!all) {
    for (int i = 0; i < 64; ++i) rows.push_back(gpu_test::Rng()() % s.n);
    for (int r = std::max(0, s.n - 5); r < s.n; ++r) rows.push_back(r);
  }
  std::vector<double> ref, out;
  std::vector<double> wrow(s.k);
  for (int r : rows) {
    for (int c = 0; c < s.k; ++c) {
      wrow[c] = gpu_test::ToF(gpu_test::ToB(
          kernels::RandomFillValue(seed, static_cast<int64_t>(r) * s.k + c, 0.0f, 0.02f)));
    }
    for (int b = 0; b < batch; ++b) {
      double acc = 0;
      for (int c = 0; c < s.k; ++c) acc += wrow[c] * gpu_test::ToF(xb[static_cast<size_t>(b) * s.k + c]);
      if (softcap > 0) acc = softcap * std::tanh(acc / softcap);
      ref.push_back(acc);
      out.push_back(got[static_cast<size_t>(b) * s.n + r]);
    }
  }
  const double tol = f32_out ? 1e-4 : 8e-3;
  EXPECT_LT(gpu_test::RelErr(out, ref, 0, ref.size()), tol);
}

TEST(GemvTest, RealShapesEveryVariantBatchOne) {
  GEMMA_REQUIRE_GPU();
  for (const Shape& s : kShapes) {
    for (int v = 0; v < kernels::NumGemvVariants(); ++v) {
      if (kernels::GemvVariantSupportsBatch(v, 1)) CheckGemv(s, 1, v, false, 0.0f);
    }
  }
}

// Tensor-core tilings (batch 2..8 only): every shape, every batch with a
// rotating tiling, every tiling at batches 2, 3 and 8; odd shapes cover rows
// past n, k not a multiple of the 32-k warp step and uneven K splits.
TEST(GemvTest, TensorCoreTilingsBatchesTwoToEight) {
  GEMMA_REQUIRE_GPU();
  std::vector<int> mma;
  for (int v = 0; v < kernels::NumGemvVariants(); ++v) {
    if (kernels::GemvVariantUsesTensorCores(v)) mma.push_back(v);
  }
  ASSERT_FALSE(mma.empty());
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.push_back({4099, 1032});
  shapes.push_back({17, 24});
  for (size_t i = 0; i < shapes.size(); ++i) {
    for (int b = 2; b <= kernels::kGemvMaxBatch; ++b) {
      CheckGemv(shapes[i], b, mma[(i + b) % mma.size()], false, 0.0f);
    }
    for (int v : mma) {
      for (int b : {2, 3, 8}) CheckGemv(shapes[i], b, v, false, 0.0f);
    }
  }
  // lm_head: fp32 logits with the final softcap; and plain fp32 output.
  for (int b = 2; b <= kernels::kGemvMaxBatch; ++b) CheckGemv(kShapes[6], b, mma[b % mma.size()], true, 30.0f);
  for (int v : mma) CheckGemv(kShapes[7], 5, v, true, 0.0f);
}

TEST(GemvTest, BatchesAndDefaultVariant) {
  GEMMA_REQUIRE_GPU();
  for (const Shape& s : {kShapes[0], kShapes[5], kShapes[7], kShapes[8]}) {
    for (int b = 1; b <= kernels::kGemvMaxBatch; ++b) CheckGemv(s, b, -1, false, 0.0f);
    for (int v = 0; v < kernels::NumGemvVariants(); ++v) {
      CheckGemv(s, 8, v, false, 0.0f);
      CheckGemv(s, 3, v, false, 0.0f);
    }
  }
}

TEST(GemvTest, Fp32OutputWithSoftcap) {
  GEMMA_REQUIRE_GPU();
  CheckGemv(kShapes[6], 1, -1, true, 30.0f);
  CheckGemv(kShapes[6], 4, -1, true, 30.0f);
  CheckGemv(kShapes[7], 3, 0, true, 0.0f);
}

TEST(GemvTest, RejectsBadArguments) {
  kernels::GemvParams p;
  EXPECT_NE(kernels::LaunchGemv(p, nullptr), "");
  __nv_bfloat16* fake = reinterpret_cast<__nv_bfloat16*>(16);
  p.w = fake;
  p.x = fake;
  p.out_bf16 = fake;
  p.n = 8;
  p.k = 12;  // not a multiple of 8
  p.batch = 1;
  EXPECT_NE(kernels::LaunchGemv(p, nullptr), "");
  p.k = 16;
  p.batch = 9;
  EXPECT_NE(kernels::LaunchGemv(p, nullptr), "");
  p.batch = 1;  // tensor-core tilings start at batch 2
  p.variant = kernels::NumGemvSimtVariants();
  ASSERT_TRUE(kernels::GemvVariantUsesTensorCores(p.variant));
  EXPECT_FALSE(kernels::GemvVariantSupportsBatch(p.variant, 1));
  EXPECT_NE(kernels::LaunchGemv(p, nullptr), "");
  p.variant = kernels::NumGemvVariants();
  p.batch = 2;
  EXPECT_NE(kernels::LaunchGemv(p, nullptr), "");
}

}  // namespace
}  // namespace gemma
