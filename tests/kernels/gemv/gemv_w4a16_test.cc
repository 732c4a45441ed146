// W4A16 kernels vs float64 host references of the dequantized weights: the
// device Q4_0 quantizer (the host quantizer's bits exactly), the tiling of
// the row layout, the bf16 dequantizer, and the W4A16 kernel (every tiling at
// the smallest and largest batch it serves, batches 1..64, group 32 and 128
// inputs, the Gemma 4 31B shape classes incl. the 262144-row LM head, the
// fortunes fixture's shapes and odd ones; bf16 and fp32 + softcap output),
// and the paired tiling of a fused gate|up matrix (rows back in order, or
// gelu_tanh(gate) * up written by the kernel).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/model/quantization_int4.h"
#include "engine/model/weights.h"
#include "kernels/gemv/gemv_w4a16.h"
#include "kernels/init/random_init.h"
#include "kernels/quant/w4_quant.h"
#include "tests/common/gpu_test_util.h"

namespace gemma {
namespace {

using gpu_test::DeviceArray;

struct Shape {
  int n, k;
};
// 31B: fused qkv (sliding, global), o_proj (sliding, global), gate_up, down,
// the vocabulary; fortunes (hidden 256, intermediate 512, vocab 1024); odd.
const Shape kBigShapes[] = {{16384, 5376}, {18432, 5376}, {5376, 8192}, {5376, 16384},
                            {43008, 5376}, {5376, 21504}, {262144, 5376}};
const Shape kSmallShapes[] = {{512, 256}, {256, 512}, {1024, 256}, {1024, 512}, {7, 32}, {33, 96}, {1000, 544}, {4099, 1056}};

// A matrix in the row layout (host copy, the reference's source) and tiled on
// the device (what the kernels read).
struct W4Matrix {
  Shape s{};
  int group = 32;
  int kpad = 0;
  std::vector<uint8_t> packed;   // host copy of the row layout
  std::vector<uint16_t> scales;
  DeviceArray<uint8_t> row_w;
  DeviceArray<__half> row_sc;
  DeviceArray<uint8_t> w;        // tiled
  DeviceArray<__half> sc;
  bool paired = false;
  W4Matrix(Shape shape, int g)
      : s(shape), group(g), kpad(kernels::W4PaddedK(shape.k)),
        row_w(size_t(shape.n) * kernels::W4PaddedK(shape.k) / 2), row_sc(size_t(shape.n) * kernels::W4PaddedK(shape.k) / g),
        w(size_t(kernels::W4TiledCodeBytes(shape.n, shape.k))),
        sc(size_t(kernels::W4TiledScaleBytes(shape.n, shape.k) / 2)) {}
  // Decoded value of (row, col) from the row layout, exact in double.
  double Value(int row, int col) const {
    const int g = col / 32, t = (col % 32) / 8, e = col % 8;
    uint32_t word;
    std::memcpy(&word, packed.data() + size_t(row) * (kpad / 2) + quant::W4WordOffset(g, t), 4);
    const int u = (word >> (4 * quant::W4NibbleOf(e))) & 0xF;
    return double(u - 8) * double(HalfToFloat(scales[size_t(row) * (kpad / group) + col / group]));
  }
  void Tile(bool pair = false) {
    paired = pair;
    w.Poison();
    sc.Poison();
    ASSERT_EQ(kernels::LaunchTileW4({row_w.get(), row_sc.get(), group, w.get(), sc.get(), s.n, s.k, paired}, nullptr),
              "");
    CUDA_OK(cudaDeviceSynchronize());
  }
};

// Host-made codes and scales (any group), packed on the host, tiled on the device.
std::unique_ptr<W4Matrix> HostMatrix(Shape s, int group) {
  auto m = std::make_unique<W4Matrix>(s, group);
  quant::Int4Matrix q;
  q.rows = s.n;
  q.cols = s.k;
  q.group = group;
  q.codes.resize(size_t(s.n) * s.k);
  for (uint8_t& c : q.codes) c = gpu_test::Rng()() % 16;
  q.scales.resize(size_t(s.n) * q.groups_per_row());
  std::uniform_real_distribution<float> d(0.001f, 0.01f);
  for (uint16_t& v : q.scales) v = quant::FloatToHalf(d(gpu_test::Rng()));
  const quant::W4DeviceMatrix dev = quant::PackForDevice(q);
  m->packed = dev.packed;
  m->scales = dev.scales;
  m->row_w.Upload(m->packed);
  std::vector<__half> hs(dev.scales.size());
  for (size_t i = 0; i < hs.size(); ++i) {
    __half_raw raw;
    raw.x = dev.scales[i];
    hs[i] = raw;
  }
  m->row_sc.Upload(hs);
  m->Tile();
  return m;
}

// Random bf16 weights quantized to Q4_0 on the device; the row layout downloaded.
std::unique_ptr<W4Matrix> DeviceMatrix(Shape s) {
  auto m = std::make_unique<W4Matrix>(s, 32);
  DeviceArray<__nv_bfloat16> wb(size_t(s.n) * s.k);
  kernels::RandomFillParams rp;
  rp.out_bf16 = wb.get();
  rp.count = int64_t(s.n) * s.k;
  rp.seed = gpu_test::Rng()();
  EXPECT_EQ(kernels::LaunchRandomFill(rp, nullptr), "");
  EXPECT_EQ(kernels::LaunchQuantizeQ4_0({wb.get(), nullptr, m->row_w.get(), m->row_sc.get(), s.n, s.k}, nullptr), "");
  m->packed = m->row_w.Download();
  const std::vector<__half> hs = m->row_sc.Download();
  m->scales.resize(hs.size());
  std::memcpy(m->scales.data(), hs.data(), hs.size() * 2);
  m->Tile();
  return m;
}

// The smallest and the largest batch a tiling serves.
std::vector<int> BatchesOf(int variant) {
  std::vector<int> fits;
  for (int b = 1; b <= kernels::kW4MaxBatch; ++b) {
    if (kernels::GemvW4VariantFits(variant, b)) fits.push_back(b);
  }
  if (fits.empty()) return {};
  return {fits.front(), fits.back()};
}

double GeluTanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

// gelu: the paired matrix's gelu gate, [batch, n / 2] bf16. x_stddev: x's
// spread. partial: fp32 partial sums (GemvW4Params::partial_sums), added
// here in order as their consumer does.
void CheckGemv(const W4Matrix& m, int batch, int variant, bool f32_out, float softcap, bool gelu = false,
               float x_stddev = 1.0f, bool partial = false) {
  const Shape& s = m.s;
  SCOPED_TRACE(testing::Message() << "n=" << s.n << " k=" << s.k << " group=" << m.group << " batch=" << batch
                                  << " variant=" << kernels::GemvW4VariantName(variant) << " paired=" << m.paired
                                  << " gelu=" << gelu << " x_stddev=" << x_stddev << " partial=" << partial);
  const int width = gelu ? s.n / 2 : s.n;  // output columns
  const int parts = partial ? kernels::GemvW4VariantSplits(variant) : 1;
  const auto xb = gpu_test::ToBf16(gpu_test::RandomFloats(size_t(batch) * s.k, 0.0f, x_stddev));
  DeviceArray<__nv_bfloat16> x(xb);
  DeviceArray<float> out32(size_t(parts) * batch * width);
  DeviceArray<__nv_bfloat16> out16(size_t(batch) * width);
  out32.Poison();
  out16.Poison();
  kernels::GemvW4Params p;
  p.w = m.w.get();
  p.scales = m.sc.get();
  p.x = x.get();
  if (f32_out) p.out_f32 = out32.get(); else p.out_bf16 = out16.get();
  p.n = s.n;
  p.k = s.k;
  p.batch = batch;
  p.softcap = softcap;
  p.variant = variant;
  p.paired = m.paired;
  p.gelu_gate = gelu;
  p.partial_sums = partial;
  ASSERT_EQ(kernels::LaunchGemvW4(p, nullptr), "");
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> got = f32_out ? out32.Download() : gpu_test::ToFloat(out16.Download());
  for (int part = 1; part < parts; ++part) {
    for (int i = 0; i < width; ++i) got[i] += got[size_t(part) * width + i];
  }
  got.resize(size_t(batch) * width);
  std::vector<int> rows;
  const bool all = int64_t(s.n) * s.k <= (1 << 21);
  for (int r = 0; r < width && all; ++r) rows.push_back(r);
  if (!all) {
    for (int i = 0; i < 24; ++i) rows.push_back(gpu_test::Rng()() % width);
    for (int r = std::max(0, width - 17); r < width; ++r) rows.push_back(r);
  }
  // Dequantized rows decoded once per row, x once: the reference costs
  // rows x k x batch multiply-adds, not as many decodes.
  std::vector<double> xd(xb.size());
  for (size_t i = 0; i < xb.size(); ++i) xd[i] = gpu_test::ToF(xb[i]);
  std::vector<double> wrow(s.k), wrow2(s.k);
  auto decode = [&](int r, std::vector<double>& out_row) {
    for (int c = 0; c < s.k; ++c) out_row[c] = m.Value(r, c);
  };
  auto dot = [&](const std::vector<double>& wr, int b) {
    double acc = 0;
    const double* xr = xd.data() + size_t(b) * s.k;
    for (int c = 0; c < s.k; ++c) acc += wr[c] * xr[c];
    return acc;
  };
  std::vector<double> ref, out;
  for (int r : rows) {
    decode(r, wrow);
    if (gelu) decode(r + s.n / 2, wrow2);
    for (int b = 0; b < batch; ++b) {
      double acc = gelu ? GeluTanh(dot(wrow, b)) * dot(wrow2, b) : dot(wrow, b);
      if (softcap > 0) acc = softcap * std::tanh(acc / softcap);
      ref.push_back(acc);
      out.push_back(got[size_t(b) * width + r]);
    }
  }
  // Every output was written (poisoned with NaN).
  for (float v : got) ASSERT_TRUE(std::isfinite(v));
  const double tol = f32_out ? 2e-5 : 6e-3;
  EXPECT_LT(gpu_test::RelErr(out, ref, 0, ref.size()), tol);
}

TEST(QuantizeQ4_0DeviceTest, SameBitsAsTheHostQuantizer) {
  GEMMA_REQUIRE_GPU();
  for (Shape s : {Shape{37, 5376}, Shape{5, 96}, Shape{3, 32}}) {
    std::vector<float> wf = gpu_test::RandomFloats(size_t(s.n) * s.k, 0.0f, 0.02f);
    for (int c = 0; c < 32; ++c) wf[c] = 0.0f;              // a zero block
    for (int c = 32; c < 64 && s.k >= 64; ++c) wf[c] = 0.01f * (c % 5);  // repeated values: ties
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(testing::Message() << s.n << "x" << s.k << (bf16 ? " bf16" : " f32"));
      const auto wb = gpu_test::ToBf16(wf);
      std::vector<float> host_in = bf16 ? gpu_test::ToFloat(wb) : wf;
      auto q = quant::QuantizeQ4_0(host_in, s.n, s.k);
      ASSERT_TRUE(q.ok()) << q.status();
      const quant::W4DeviceMatrix want = quant::PackForDevice(*q);
      DeviceArray<float> in32(wf);
      DeviceArray<__nv_bfloat16> in16(wb);
      W4Matrix m(s, 32);
      kernels::QuantizeQ4_0Params p;
      if (bf16) p.in_bf16 = in16.get(); else p.in_f32 = in32.get();
      p.w = m.row_w.get();
      p.scales = m.row_sc.get();
      p.n = s.n;
      p.k = s.k;
      ASSERT_EQ(kernels::LaunchQuantizeQ4_0(p, nullptr), "");
      EXPECT_EQ(m.row_w.Download(), want.packed);
      const std::vector<__half> hs = m.row_sc.Download();
      std::vector<uint16_t> got(hs.size());
      std::memcpy(got.data(), hs.data(), hs.size() * 2);
      EXPECT_EQ(got, want.scales);
    }
  }
}

TEST(DequantizeW4Test, MatchesTheHostValuesRoundedToBf16) {
  GEMMA_REQUIRE_GPU();
  for (int group : {32, 128}) {
    for (Shape s : {Shape{33, 96}, Shape{64, 5376}, Shape{17, 160}}) {
      auto m = HostMatrix(s, group);
      DeviceArray<__nv_bfloat16> out(size_t(s.n) * s.k);
      out.Poison();
      ASSERT_EQ(kernels::LaunchDequantizeW4({m->w.get(), m->sc.get(), out.get(), s.n, s.k}, nullptr), "");
      const auto got = out.Download();
      for (int r = 0; r < s.n; ++r) {
        for (int c = 0; c < s.k; ++c) {
          ASSERT_EQ(gpu_test::ToF(got[size_t(r) * s.k + c]), gpu_test::ToF(gpu_test::ToB(float(m->Value(r, c)))))
              << "group " << group << " " << r << "," << c;
        }
      }
    }
  }
}

TEST(GemvW4Test, SmallAndOddShapesEveryTilingBothGroups) {
  GEMMA_REQUIRE_GPU();
  for (Shape s : kSmallShapes) {
    for (int group : {32, 128}) {
      auto m = HostMatrix(s, group);
      for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
        for (int b : BatchesOf(v)) CheckGemv(*m, b, v, false, 0.0f);
      }
      for (int b : {2, 5, 7, 12, 23, 40, 63}) CheckGemv(*m, b, -1, false, 0.0f);
      CheckGemv(*m, 3, -1, true, 30.0f);
      CheckGemv(*m, 33, -1, true, 30.0f);
      // Tilings that stage x with its group sums (xs-, xa-, xd-, xc-, xd2-, xc2-) start each group's
      // partial from -136 * sum(x): fp32 outputs hold the same tolerance.
      for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
        const std::string name = kernels::GemvW4VariantName(v);
        if (kernels::GemvW4VariantFits(v, 1) && (name.rfind("xs-", 0) == 0 || name.rfind("xa-", 0) == 0 ||
                                                 name.rfind("xd", 0) == 0 || name.rfind("xc", 0) == 0)) {
          CheckGemv(*m, 1, v, true, 0.0f);
        }
        // xc- keeps a group sum per batch row (rows rounded up to even):
        // odd and even batches between the ends (batch-1 tilings have none).
        if (name.rfind("xc-", 0) == 0) {
          for (int b : {3, 6}) {
            if (kernels::GemvW4VariantFits(v, b)) CheckGemv(*m, b, v, false, 0.0f);
          }
        }
      }
    }
  }
}

// x far from unit scale, up to ~10^6 and down to ~10^-6 (beyond f16's range
// both ways): every batch-1 tiling holds the same tolerance, the staged group
// sums (-136 * sum(x)) included.
TEST(GemvW4Test, LargeAndSmallXEveryTiling) {
  GEMMA_REQUIRE_GPU();
  for (Shape s : {Shape{256, 1056}, Shape{1024, 5376}}) {
    auto m = HostMatrix(s, 32);
    for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
      if (!kernels::GemvW4VariantFits(v, 1)) continue;
      for (float spread : {2e5f, 1e-6f}) {
        CheckGemv(*m, 1, v, false, 0.0f, false, spread);
        CheckGemv(*m, 1, v, true, 0.0f, false, spread);
      }
    }
  }
}

TEST(GemvW4Test, RealShapesEveryTilingQ4_0) {
  GEMMA_REQUIRE_GPU();
  for (Shape s : kBigShapes) {
    auto m = DeviceMatrix(s);
    for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
      const std::vector<int> batches = BatchesOf(v);
      if (batches.empty()) continue;  // the split tilings: SplitTilingsPartialSumsAddUpToTheOutput
      // Host reference time: the widths above 8 rows at their largest batch
      // (the small shapes check both ends), the LM head only up to 8 rows.
      if (s.n == 262144 && batches.front() > 1) continue;
      if (batches.front() > 1) {
        CheckGemv(*m, batches.back(), v, false, 0.0f);
        continue;
      }
      for (int b : batches) CheckGemv(*m, b, v, false, 0.0f);
    }
    for (int b : {3, 6, 13, 29, 50}) CheckGemv(*m, b, -1, false, 0.0f);
    if (s.n == 262144) CheckGemv(*m, 2, -1, true, 30.0f);  // the LM head: fp32 logits, softcap
  }
}

TEST(GemvW4Test, RealShapesGroup128) {
  GEMMA_REQUIRE_GPU();
  for (Shape s : {Shape{5376, 8192}, Shape{4096, 5376}}) {
    auto m = HostMatrix(s, 128);
    for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
      if (!BatchesOf(v).empty()) CheckGemv(*m, BatchesOf(v).back(), v, false, 0.0f);
    }
  }
}

// A fused gate|up matrix in the paired tiling: without gelu_gate the rows
// come back in the matrix's order; with it the kernel writes the gelu gate.
// Every tiling at both ends of its batches on small shapes (the fortunes
// fixture's gate|up of 2 x 512 rows among them), and the 31B's gate|up.
TEST(GemvW4Test, PairedTilingRowsInOrderAndGeluGate) {
  GEMMA_REQUIRE_GPU();
  for (Shape s : {Shape{1024, 256}, Shape{48, 96}, Shape{4096, 1056}}) {
    for (int group : {32, 128}) {
      auto m = HostMatrix(s, group);
      m->Tile(true);
      for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
        for (int b : BatchesOf(v)) {
          CheckGemv(*m, b, v, false, 0.0f, true);
          if (b == 1) CheckGemv(*m, b, v, false, 0.0f, false);
        }
      }
      for (int b : {3, 8, 13, 40}) CheckGemv(*m, b, -1, false, 0.0f, false);
      CheckGemv(*m, 5, -1, true, 0.0f, false);
    }
  }
  auto big = DeviceMatrix(Shape{43008, 5376});
  big->Tile(true);
  for (int b : {1, 2, 8, 16, 64}) CheckGemv(*big, b, -1, false, 0.0f, true);
  CheckGemv(*big, 1, -1, false, 0.0f, false);
}

// The split tilings (-p<S>): S blocks per tile, each the partial sums of its
// share of K; their sum, in order, holds the fp32 tolerance. Shapes with
// fewer super-chunks than splits (empty shares), odd ones, both groups, and
// the 31B's n = 5 376 matrices they are for. The other batch-1 tilings write
// one partial, the output itself.
TEST(GemvW4Test, SplitTilingsPartialSumsAddUpToTheOutput) {
  GEMMA_REQUIRE_GPU();
  auto check_all = [](const W4Matrix& m) {
    for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
      if (!kernels::GemvW4VariantFits(v, 1, true)) continue;
      if (kernels::GemvW4VariantSplits(v) == 1 && m.s.k > 1056) continue;  // host reference time
      CheckGemv(m, 1, v, true, 0.0f, false, 1.0f, true);
    }
  };
  for (Shape s : {Shape{7, 32}, Shape{33, 96}, Shape{512, 256}, Shape{1000, 544}, Shape{4099, 1056}}) {
    for (int group : {32, 128}) check_all(*HostMatrix(s, group));
  }
  for (Shape s : {Shape{5376, 8192}, Shape{5376, 16384}, Shape{5376, 21504}}) check_all(*DeviceMatrix(s));
  auto m = HostMatrix(Shape{256, 1056}, 32);
  for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
    if (kernels::GemvW4VariantSplits(v) == 1) continue;
    for (float spread : {2e5f, 1e-6f}) CheckGemv(*m, 1, v, true, 0.0f, false, spread, true);
  }
}

TEST(DequantizeW4Test, PairedTilingKeepsTheRowOrder) {
  GEMMA_REQUIRE_GPU();
  const Shape s{64, 160};
  auto m = HostMatrix(s, 32);
  m->Tile(true);
  DeviceArray<__nv_bfloat16> out(size_t(s.n) * s.k);
  out.Poison();
  kernels::DequantizeW4Params p{m->w.get(), m->sc.get(), out.get(), s.n, s.k, true};
  ASSERT_EQ(kernels::LaunchDequantizeW4(p, nullptr), "");
  const auto got = out.Download();
  for (int r = 0; r < s.n; ++r) {
    for (int c = 0; c < s.k; ++c) {
      ASSERT_EQ(gpu_test::ToF(got[size_t(r) * s.k + c]), gpu_test::ToF(gpu_test::ToB(float(m->Value(r, c)))))
          << r << "," << c;
    }
  }
}

// Host-side only (runs without a GPU): the batch-1 tilings (`-b1-`) serve
// batch 1 and nothing else, and every batch up to 64 keeps a tiling.
TEST(GemvW4Tilings, BatchOneTilingsServeOnlyBatchOne) {
  int batch_one = 0;
  for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
    const std::string name = kernels::GemvW4VariantName(v);
    if (name.find("-b1-") == std::string::npos || kernels::GemvW4VariantSplits(v) > 1) continue;
    ++batch_one;
    EXPECT_TRUE(kernels::GemvW4VariantFits(v, 1)) << name;
    for (int b = 2; b <= kernels::kW4MaxBatch; ++b) EXPECT_FALSE(kernels::GemvW4VariantFits(v, b)) << name << " " << b;
  }
  EXPECT_GT(batch_one, 0);
  // Split tilings serve batch 1 only where the caller takes partial sums.
  int split = 0;
  for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
    if (kernels::GemvW4VariantSplits(v) == 1) continue;
    ++split;
    EXPECT_FALSE(kernels::GemvW4VariantFits(v, 1)) << kernels::GemvW4VariantName(v);
    EXPECT_TRUE(kernels::GemvW4VariantFits(v, 1, true)) << kernels::GemvW4VariantName(v);
  }
  EXPECT_GT(split, 0);
  for (int b = 1; b <= kernels::kW4MaxBatch; ++b) {
    int fits = 0;
    for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) fits += kernels::GemvW4VariantFits(v, b);
    EXPECT_GT(fits, 0) << "batch " << b;
  }
}

TEST(GemvW4Test, RejectsBadArguments) {
  GEMMA_REQUIRE_GPU();
  DeviceArray<uint8_t> w(1024);  // one tile x one super-chunk
  DeviceArray<__half> sc(64);
  DeviceArray<__nv_bfloat16> x(64), out(64);
  kernels::GemvW4Params p;
  p.w = w.get();
  p.scales = sc.get();
  p.x = x.get();
  p.out_bf16 = out.get();
  p.n = 1;
  p.k = 48;
  p.batch = 1;
  EXPECT_NE(kernels::LaunchGemvW4(p, nullptr), "");
  p.k = 64;
  p.batch = 65;
  EXPECT_NE(kernels::LaunchGemvW4(p, nullptr), "");
  p.batch = 9;
  p.variant = 0;  // an 8-row tiling
  EXPECT_NE(kernels::LaunchGemvW4(p, nullptr), "");
  p.batch = 1;
  p.variant = kernels::NumGemvW4Variants();
  EXPECT_NE(kernels::LaunchGemvW4(p, nullptr), "");
  p.variant = -1;
  EXPECT_EQ(kernels::LaunchGemvW4(p, nullptr), "");
  p.gelu_gate = true;  // not paired
  EXPECT_NE(kernels::LaunchGemvW4(p, nullptr), "");
  p.paired = true;  // n = 1: not a multiple of 16
  EXPECT_NE(kernels::LaunchGemvW4(p, nullptr), "");
  p.gelu_gate = false;
  p.paired = false;
  p.partial_sums = true;  // bf16 output
  EXPECT_NE(kernels::LaunchGemvW4(p, nullptr), "");
  DeviceArray<float> out32(4 * 64);
  p.out_bf16 = nullptr;
  p.out_f32 = out32.get();
  for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
    if (kernels::GemvW4VariantSplits(v) == 1) continue;
    p.variant = v;
    p.partial_sums = false;  // a split tiling writes partial sums only
    EXPECT_NE(kernels::LaunchGemvW4(p, nullptr), "");
    p.partial_sums = true;
    EXPECT_EQ(kernels::LaunchGemvW4(p, nullptr), "");
    p.batch = 2;
    EXPECT_NE(kernels::LaunchGemvW4(p, nullptr), "");
    p.batch = 1;
  }
}

}  // namespace
}  // namespace gemma
