// Producers that emit the fp8 input of the next linear themselves:
// the residual norm and the gelu gate with out_fp8. Their codes and scales
// must be exactly what LaunchQuantizeRowsFp8 writes for their bf16 output
// (checked against the host in gemv_fp8_test), and that bf16 output must not
// change. Shapes: the 31B hidden / intermediate sizes and odd widths, 1 (decode)
// and several token rows, plus an all-zero row (scale 1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/elementwise/elementwise.h"
#include "kernels/norm/residual_norm.h"
#include "kernels/quant/fp8_quant.h"
#include "tests/common/gpu_test_util.h"

namespace gemma {
namespace {

using gpu_test::DeviceArray;

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Codes and scales the stand-alone quantizer writes for `x` (rows x cols).
void Quantize(const DeviceArray<__nv_bfloat16>& x, int rows, int cols, std::vector<uint8_t>* codes,
              std::vector<float>* scales) {
  DeviceArray<uint8_t> q(size_t(rows) * cols);
  DeviceArray<float> s(rows);
  ASSERT_EQ(kernels::LaunchQuantizeRowsFp8({x.get(), q.get(), s.get(), rows, cols}, nullptr), "");
  *codes = q.Download();
  *scales = s.Download();
}

void CheckResidualNorm(int tokens, int hidden, bool with_branch, bool over_cluster = false) {
  SCOPED_TRACE(testing::Message() << "tokens=" << tokens << " hidden=" << hidden << " branch=" << with_branch
                                  << " over_cluster=" << over_cluster);
  std::vector<float> h = gpu_test::RandomFloats(size_t(tokens) * hidden, 0.0f, 4.0f);
  if (!with_branch && tokens > 1) std::fill(h.begin() + hidden, h.begin() + 2 * hidden, 0.0f);  // zero row
  DeviceArray<float> res_a(h), res_b(h);
  DeviceArray<__nv_bfloat16> branch(gpu_test::ToBf16(gpu_test::RandomFloats(size_t(tokens) * hidden)));
  DeviceArray<float> bw(gpu_test::RandomFloats(hidden, 1.0f, 0.5f)), ow(gpu_test::RandomFloats(hidden, 1.0f, 2.0f));
  DeviceArray<float> scalar(std::vector<float>{0.7f});
  DeviceArray<__nv_bfloat16> out_a(size_t(tokens) * hidden), out_b(size_t(tokens) * hidden);
  DeviceArray<uint8_t> codes(size_t(tokens) * hidden);
  DeviceArray<float> scales(tokens);
  codes.Poison();
  scales.Poison();
  kernels::ResidualNormParams p;
  if (with_branch) {
    p.branch = branch.get();
    p.branch_weight = bw.get();
    p.layer_scalar = scalar.get();
  }
  p.out_weight = ow.get();
  p.num_tokens = tokens;
  p.hidden = hidden;
  p.over_cluster = over_cluster;
  p.residual = res_b.get();
  p.out = out_b.get();
  ASSERT_EQ(kernels::LaunchResidualNorm(p, nullptr), "");
  p.residual = res_a.get();
  p.out = out_a.get();
  p.out_fp8 = codes.get();
  p.out_scale = scales.get();
  ASSERT_EQ(kernels::LaunchResidualNorm(p, nullptr), "");
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(SameBits(out_a.Download(), out_b.Download())) << "bf16 output changed";
  EXPECT_TRUE(SameBits(res_a.Download(), res_b.Download())) << "residual changed";
  std::vector<uint8_t> want_codes;
  std::vector<float> want_scales;
  Quantize(out_a, tokens, hidden, &want_codes, &want_scales);
  EXPECT_TRUE(SameBits(scales.Download(), want_scales));
  EXPECT_TRUE(SameBits(codes.Download(), want_codes));
  if (!with_branch && tokens > 1) EXPECT_EQ(scales.Download()[1], 1.0f);
}

TEST(Fp8ProducersTest, ResidualNormEmitsQuantizerBits) {
  GEMMA_REQUIRE_GPU();
  for (int tokens : {1, 5, 300}) {  // 300: the prefill form (kManyTokens)
    for (int hidden : {5376, 1040, 8, 4096, 16384}) {  // 3, 1, 1, 2 and 8 vectors per thread
      CheckResidualNorm(tokens, hidden, true);
      CheckResidualNorm(tokens, hidden, false);
    }
  }
  // Over a cluster (ResidualNormParams::over_cluster): the row maximum taken across its blocks.
  for (int tokens : {1, 5, kernels::kClusterNormMaxTokens}) {
    for (int hidden : {5376, 1040, 8, 16384}) {
      CheckResidualNorm(tokens, hidden, true, true);
      CheckResidualNorm(tokens, hidden, false, true);
    }
  }
}

void CheckGeluGate(int tokens, int inter) {
  SCOPED_TRACE(testing::Message() << "tokens=" << tokens << " inter=" << inter);
  std::vector<float> in = gpu_test::RandomFloats(size_t(tokens) * 2 * inter, 0.0f, 2.0f);
  if (tokens > 2) std::fill(in.begin() + 2 * 2 * inter, in.begin() + 3 * 2 * inter, 0.0f);  // zero row
  DeviceArray<__nv_bfloat16> x(gpu_test::ToBf16(in));
  DeviceArray<__nv_bfloat16> out_a(size_t(tokens) * inter), out_b(size_t(tokens) * inter);
  DeviceArray<uint8_t> codes(size_t(tokens) * inter);
  DeviceArray<float> scales(tokens);
  codes.Poison();
  scales.Poison();
  kernels::GeluGateParams p{x.get(), out_b.get(), tokens, inter};
  ASSERT_EQ(kernels::LaunchGeluGate(p, nullptr), "");
  p.out = out_a.get();
  p.out_fp8 = codes.get();
  p.out_scale = scales.get();
  ASSERT_EQ(kernels::LaunchGeluGate(p, nullptr), "");
  CUDA_OK(cudaDeviceSynchronize());
  // Two kernels inline the same gelu; allow for a different FMA contraction.
  const auto a = gpu_test::ToFloat(out_a.Download()), b = gpu_test::ToFloat(out_b.Download());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_LE(std::fabs(a[i] - b[i]), std::fabs(b[i]) / 128 + 1e-30f) << i;
  std::vector<uint8_t> want_codes;
  std::vector<float> want_scales;
  Quantize(out_a, tokens, inter, &want_codes, &want_scales);
  EXPECT_TRUE(SameBits(scales.Download(), want_scales));
  EXPECT_TRUE(SameBits(codes.Download(), want_codes));
  if (tokens > 2) EXPECT_EQ(scales.Download()[2], 1.0f);
}

TEST(Fp8ProducersTest, GeluGateEmitsQuantizerBits) {
  GEMMA_REQUIRE_GPU();
  for (int tokens : {1, 3, 9}) {
    for (int inter : {21504, 528, 8}) CheckGeluGate(tokens, inter);
  }
}

TEST(Fp8ProducersTest, RejectsCodesWithoutScales) {
  uint8_t b = 0;
  float f = 0;
  __nv_bfloat16 h{};
  kernels::ResidualNormParams p;
  p.residual = &f;
  p.out_weight = &f;
  p.out = &h;
  p.num_tokens = 1;
  p.hidden = 8;
  p.out_fp8 = &b;
  EXPECT_NE(kernels::LaunchResidualNorm(p, nullptr).find("out_scale"), std::string::npos);
  kernels::GeluGateParams g{&h, &h, 1, 8, &b, nullptr};
  EXPECT_NE(kernels::LaunchGeluGate(g, nullptr).find("out_scale"), std::string::npos);
  g.out_scale = &f;
  g.inter = 32776;  // past the fp8 kernel's registers
  EXPECT_NE(kernels::LaunchGeluGate(g, nullptr).find("32768"), std::string::npos);
}

}  // namespace
}  // namespace gemma
