// wgmma FP8 linear (decode batches up to 64/128 tokens, sm_90a) vs double
// references computed from the E4M3 codes and scales the device produced,
// so every difference beyond fp32 summation error is a layout, descriptor,
// pipeline or split-K mistake:
// - every variant x grid (splits {1, 2, 5}; stream-K over 3, 37 and 264
//   CTAs) x m in {1, 8, 9, 16, 17, 33, 64, 65,
//   128} (those the variant's token tile takes) at the 31B shapes, the 31B LM
//   head and odd shapes, bf16 and fp32+softcap output; the whole [m, n]
//   output must be written and the token row after it untouched;
// - exact one-hot patterns (one nonzero weight per row at a k that varies
//   with the row; one nonzero x per token) that name the first wrong (row,
//   token) of a descriptor, swizzle or fragment mistake;
// - repeated launches and CUDA-graph replays bit-identical (split counters
//   come back to zero), an x rewritten by the previous kernel (PDL) is seen;
// - parameter validation (no device needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/gemv/wgmma_fp8.h"
#include "kernels/quant/fp8_quant.h"
#include "tests/common/fp8_test_util.h"
#include "tests/common/gpu_test_util.h"

namespace gemma {
namespace {

using fp8_test::Decode;
using fp8_test::Fp8Matrix;
using fp8_test::Shape;
using gpu_test::DeviceArray;

constexpr int kMs[] = {1, 8, 9, 16, 17, 33, 64, 65, 128};
// Grids: K splits > 0; -c: stream-K over c CTAs (3: runs of many row tiles;
// 37: runs that start and end inside row tiles; 264: two per SM of an H200,
// most row tiles shared).
constexpr int kGrids[] = {1, 2, 5, -3, -37, -264};
constexpr int kMaxSplits = 5;
constexpr int kMaxStreamKCtas = 264;
constexpr float kSoftcap = 5.0f;

// 31B: QKV sliding / global, o_proj sliding / global, gate|up, down.
const Shape kRealShapes[] = {{16384, 5376}, {18432, 5376}, {5376, 8192},
                             {5376, 16384}, {43008, 5376}, {5376, 21504}};
// Rows not a multiple of 64, k not a multiple of the 128-k tile (TMA zero
// fill), fewer k-tiles than splits (k = 16, 32, 272 with 5 splits).
const Shape kOddShapes[] = {{1000, 528}, {7, 16}, {33, 272}, {4099, 1040}, {64, 32}};

// Split-K scratch for n rows, counters zeroed once.
struct Scratch {
  explicit Scratch(int n)
      : workspace(std::max<size_t>({1, kernels::WgmmaFp8WorkspaceFloats(-1, n, kMaxSplits),
                                    kernels::WgmmaFp8StreamKWorkspaceFloats(-1, kMaxStreamKCtas)})),
        counters(kernels::WgmmaFp8RowTiles(-1, n)),
        num_counters(kernels::WgmmaFp8RowTiles(-1, n)) {
    cudaMemset(counters.get(), 0, num_counters * sizeof(int));
  }
  DeviceArray<float> workspace;
  DeviceArray<int> counters;
  int num_counters;
};

// kWgmmaFp8MaxM quantized tokens of k (a launch with m tokens reads the
// first m) and the exact dot products of sampled weight rows (every row when
// the reference is cheap, else random ones plus the first and last 17).
struct Tokens {
  Tokens(const Shape& s, const Fp8Matrix& w) : x8(size_t(kM) * s.k), xs(kM) {
    DeviceArray<__nv_bfloat16> x(gpu_test::ToBf16(gpu_test::RandomFloats(size_t(kM) * s.k)));
    EXPECT_EQ(kernels::LaunchQuantizeRowsFp8({x.get(), x8.get(), xs.get(), kM, s.k}, nullptr), "");
    const std::vector<uint8_t> xc = x8.Download();
    const std::vector<float> xsc = xs.Download();
    if (int64_t(s.n) * s.k <= (1 << 22)) {
      for (int r = 0; r < s.n; ++r) rows.push_back(r);
    } else {
      for (int r = 0; r < 17; ++r) rows.push_back(r);
      for (int i = 0; i < 48; ++i) rows.push_back(gpu_test::Rng()() % s.n);
      for (int r = s.n - 17; r < s.n; ++r) rows.push_back(r);
    }
    std::vector<double> wrow(s.k);
    for (int r : rows) {
      for (int c = 0; c < s.k; ++c) wrow[c] = Decode(w.codes[size_t(r) * s.k + c]);
      for (int b = 0; b < kM; ++b) {
        double acc = 0;
        for (int c = 0; c < s.k; ++c) acc += wrow[c] * Decode(xc[size_t(b) * s.k + c]);
        ref.push_back(acc * w.scales[r] * xsc[b]);
      }
    }
  }
  static constexpr int kM = kernels::kWgmmaFp8MaxM;
  DeviceArray<uint8_t> x8;
  DeviceArray<float> xs;
  std::vector<int> rows;
  std::vector<double> ref;  // [rows][kM]
};

// The grid (kGrids' encoding) and the scratch of a launch.
void SetGrid(kernels::WgmmaFp8Params& p, int grid, Scratch& scratch) {
  p.splits = grid > 0 ? grid : 1;
  p.streamk_ctas = grid < 0 ? -grid : 0;
  p.workspace = scratch.workspace.get();
  p.counters = scratch.counters.get();
}

kernels::WgmmaFp8Params Params(const Shape& s, const Fp8Matrix& w, const kernels::WgmmaFp8Weights& map,
                               const Tokens& x, int m, int variant, int grid, Scratch& scratch) {
  kernels::WgmmaFp8Params p;
  p.w = &map;
  p.w_scale = w.ws.get();
  p.x = x.x8.get();
  p.x_scale = x.xs.get();
  p.n = s.n;
  p.k = s.k;
  p.m = m;
  p.variant = variant;
  SetGrid(p, grid, scratch);
  return p;
}

std::string GridName(int grid) {
  return grid > 0 ? "splits " + std::to_string(grid) : "stream-K " + std::to_string(-grid) + " CTAs";
}

// Relative-norm tolerances. "wg-" variants accumulate all of K in the
// tensor cores (~14 significant bits, like cuBLASLt's fast accumulation:
// ~1e-3 at k = 8192 on the H200); "wgp-" variants add each 128-k tile to
// fp32 registers. Layout mistakes give errors of order 1; the exact patterns
// below check every variant to the bit. Measured worst on the H200
// (2026-11-30, 31B shapes up to k = 21504 and the LM head): "wg-" 3.1e-3
// fp32 / 4.4e-3 bf16 out, "wgp-" 1.4e-4 fp32 / 2.0e-3 bf16 out (bf16's own
// rounding).
double Tolerance(int variant, bool f32_out) {
  if (!kernels::WgmmaFp8VariantPromotes(variant)) return 1e-2;
  return f32_out ? 5e-4 : 5e-3;
}

// Returns the relative error of the outputs as stored (bf16, or fp32 after
// the softcap) against the double reference.
double Check(const Shape& s, const Fp8Matrix& w, const kernels::WgmmaFp8Weights& map, const Tokens& x, int m,
             int variant, int grid, bool f32_out, Scratch& scratch) {
  SCOPED_TRACE(testing::Message() << "n=" << s.n << " k=" << s.k << " m=" << m << " variant="
                                  << kernels::WgmmaFp8VariantName(variant) << " " << GridName(grid)
                                  << " f32=" << f32_out);
  // One token row more than m: it must stay poisoned.
  const size_t count = size_t(m + 1) * s.n;
  std::vector<float> got;
  kernels::WgmmaFp8Params p = Params(s, w, map, x, m, variant, grid, scratch);
  if (f32_out) {
    DeviceArray<float> out(count);
    out.Poison();
    p.out_f32 = out.get();
    p.softcap = kSoftcap;
    EXPECT_EQ(kernels::LaunchWgmmaFp8(p, nullptr), "");
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    got = out.Download();
  } else {
    DeviceArray<__nv_bfloat16> out(count);
    out.Poison();
    p.out_bf16 = out.get();
    EXPECT_EQ(kernels::LaunchWgmmaFp8(p, nullptr), "");
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    got = gpu_test::ToFloat(out.Download());
  }
  for (size_t i = 0; i < size_t(m) * s.n; ++i) {
    if (!std::isfinite(got[i])) {
      ADD_FAILURE() << "unwritten output: token " << i / s.n << " row " << i % s.n;
      return INFINITY;
    }
  }
  for (size_t i = size_t(m) * s.n; i < count; ++i) {
    if (!std::isnan(got[i])) {
      ADD_FAILURE() << "wrote past m: token " << m << " row " << i % s.n;
      return INFINITY;
    }
  }
  std::vector<double> ref, out;
  for (size_t i = 0; i < x.rows.size(); ++i) {
    for (int b = 0; b < m; ++b) {
      const double r = x.ref[i * Tokens::kM + b];
      ref.push_back(f32_out ? kSoftcap * std::tanh(r / kSoftcap) : r);
      out.push_back(got[size_t(b) * s.n + x.rows[i]]);
    }
  }
  const double err = gpu_test::RelErr(out, ref, 0, ref.size());
  const double tol = Tolerance(variant, f32_out);
  EXPECT_LT(err, tol);
  if (err >= tol) {
    for (size_t i = 0; i < ref.size(); ++i) {
      if (std::fabs(out[i] - ref[i]) > 0.02 * std::fabs(ref[i]) + 1e-3) {
        ADD_FAILURE() << "first bad: row " << x.rows[i / m] << " token " << i % m << " expected " << ref[i]
                      << " got " << out[i];
        break;
      }
    }
  }
  return err;
}

void CheckShape(const Shape& s, const std::vector<int>& grids) {
  Fp8Matrix w(s, gpu_test::Rng()());
  kernels::WgmmaFp8Weights map;
  ASSERT_EQ(kernels::MakeWgmmaFp8Weights(w.w8.get(), s.n, s.k, &map), "");
  Tokens x(s, w);
  Scratch scratch(s.n);
  double worst[2][2] = {};  // [promoted][f32 out]
  int failures = 0;
  for (int v = 0; v < kernels::NumWgmmaFp8Variants(); ++v) {
    for (int grid : grids) {
      for (int m : kMs) {
        if (!kernels::WgmmaFp8VariantSupportsM(v, m)) continue;
        for (bool f32_out : {false, true}) {
          const double err = Check(s, w, map, x, m, v, grid, f32_out, scratch);
          double& slot = worst[kernels::WgmmaFp8VariantPromotes(v)][f32_out];
          slot = std::max(slot, err);
          if (err >= Tolerance(v, f32_out) && ++failures >= 8) {
            FAIL() << "stopping after 8 failing launches";
          }
        }
      }
    }
  }
  // The default variant for m (-1).
  for (int m : {2, 20, 50, 100}) Check(s, w, map, x, m, -1, 1, false, scratch);
  std::printf("wgmma-fp8 test %6d x %5d: worst relative error wg- bf16 %.2e fp32 %.2e | wgp- bf16 %.2e fp32 %.2e\n",
              s.n, s.k, worst[0][0], worst[0][1], worst[1][0], worst[1][1]);
  std::vector<int> counters(scratch.num_counters);
  CUDA_OK(cudaMemcpy(counters.data(), scratch.counters.get(), counters.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < counters.size(); ++i) ASSERT_EQ(counters[i], 0) << "counter " << i << " left set";
}

TEST(WgmmaFp8Test, OddShapesEveryVariantSplitAndTokenCount) {
  GEMMA_REQUIRE_GPU();
  for (const Shape& s : kOddShapes) CheckShape(s, {std::begin(kGrids), std::end(kGrids)});
}

TEST(WgmmaFp8Test, RealShapesEveryVariantSplitAndTokenCount) {
  GEMMA_REQUIRE_GPU();
  for (const Shape& s : kRealShapes) CheckShape(s, {std::begin(kGrids), std::end(kGrids)});
}

// The tied-embedding LM head (262144 x 5376, 1.4 GB of E4M3).
TEST(WgmmaFp8Test, LmHeadShape) {
  GEMMA_REQUIRE_GPU();
  CheckShape({262144, 5376}, {1, 5, -264});
}

// Exact patterns, scales 1, every output an integer that bf16 and fp32 hold
// exactly (and small enough for the tensor cores' ~14-bit accumulation):
// - kOneHotWeights: weight row j has a single 1 at k = kj (varying with j),
//   x dense integers 1..15: out[b, j] = x[b, kj] names the (row, k) pairing
//   of the weight operand;
// - kOneHotX: token b has a single 1 at k = kb, weights dense: out[b, j] =
//   w[j, kb], the pairing of the x operand;
// - kSmallIntegers: both dense pseudo-random integers in -3..3 (|partial
//   sums| <= 9 k < 2^12): every k of every row and token contributes.
// A wrong descriptor field, swizzle, k-step offset or fragment mapping moves
// or mixes the values; the test prints the first wrong (row, token).
enum class PatternKind { kOneHotWeights, kOneHotX, kSmallIntegers };

struct Pattern {
  Shape s;
  std::vector<uint8_t> w, x;
  std::vector<float> expect;  // [m][n]
  int m;
};

uint8_t Code(int v) { return kernels::FloatToFp8E4M3(float(v)); }

const char* PatternName(PatternKind kind) {
  switch (kind) {
    case PatternKind::kOneHotWeights: return "one-hot weights";
    case PatternKind::kOneHotX: return "one-hot x";
    case PatternKind::kSmallIntegers: return "small integers";
  }
  return "";
}

Pattern MakePattern(const Shape& s, int m, PatternKind kind) {
  Pattern p{s, std::vector<uint8_t>(size_t(s.n) * s.k, 0), std::vector<uint8_t>(size_t(m) * s.k, 0),
            std::vector<float>(size_t(m) * s.n), m};
  std::vector<int> wv(size_t(s.n) * s.k), xv(size_t(m) * s.k);
  auto kj = [&](int j) { return (j * 37 + 11) % s.k; };
  auto kb = [&](int b) { return (b * 53 + 7) % s.k; };
  for (int j = 0; j < s.n; ++j) {
    for (int c = 0; c < s.k; ++c) {
      int v = 0;
      switch (kind) {
        case PatternKind::kOneHotWeights: v = c == kj(j) ? 1 : 0; break;
        case PatternKind::kOneHotX: v = (j * 3 + c * 7) % 15 + 1; break;
        case PatternKind::kSmallIntegers: v = int((uint32_t(j) * 2654435761u + uint32_t(c) * 40503u) >> 13) % 7 - 3; break;
      }
      wv[size_t(j) * s.k + c] = v;
    }
  }
  for (int b = 0; b < m; ++b) {
    for (int c = 0; c < s.k; ++c) {
      int v = 0;
      switch (kind) {
        case PatternKind::kOneHotWeights: v = (b * 5 + c * 3) % 15 + 1; break;
        case PatternKind::kOneHotX: v = c == kb(b) ? 1 : 0; break;
        case PatternKind::kSmallIntegers: v = int((uint32_t(b) * 2246822519u + uint32_t(c) * 3266489917u) >> 11) % 7 - 3; break;
      }
      xv[size_t(b) * s.k + c] = v;
    }
  }
  for (size_t i = 0; i < wv.size(); ++i) p.w[i] = Code(wv[i]);
  for (size_t i = 0; i < xv.size(); ++i) p.x[i] = Code(xv[i]);
  for (int b = 0; b < m; ++b) {
    for (int j = 0; j < s.n; ++j) {
      int64_t acc = 0;
      for (int c = 0; c < s.k; ++c) acc += int64_t(wv[size_t(j) * s.k + c]) * xv[size_t(b) * s.k + c];
      p.expect[size_t(b) * s.n + j] = float(acc);
    }
  }
  return p;
}

TEST(WgmmaFp8Test, OneHotPatternsPinpointLayoutErrors) {
  GEMMA_REQUIRE_GPU();
  const Shape s{515, 400};  // 5 weight boxes of 64 rows and a part; 3 k-tiles and a part
  for (PatternKind kind : {PatternKind::kOneHotWeights, PatternKind::kOneHotX, PatternKind::kSmallIntegers}) {
    const Pattern pat = MakePattern(s, kernels::kWgmmaFp8MaxM, kind);
    DeviceArray<uint8_t> w(pat.w), x(pat.x);
    DeviceArray<float> ws(std::vector<float>(s.n, 1.0f)), xs(std::vector<float>(pat.m, 1.0f));
    kernels::WgmmaFp8Weights map;
    ASSERT_EQ(kernels::MakeWgmmaFp8Weights(w.get(), s.n, s.k, &map), "");
    Scratch scratch(s.n);
    for (int v = 0; v < kernels::NumWgmmaFp8Variants(); ++v) {
      for (int grid : kGrids) {
        for (bool f32_out : {false, true}) {
          const int m = kernels::WgmmaFp8VariantMaxM(v);  // every token column of the tile
          SCOPED_TRACE(testing::Message() << PatternName(kind) << " variant "
                                          << kernels::WgmmaFp8VariantName(v) << " " << GridName(grid) << " f32 "
                                          << f32_out);
          DeviceArray<float> out32(size_t(m) * s.n);
          DeviceArray<__nv_bfloat16> out16(size_t(m) * s.n);
          out32.Poison();
          out16.Poison();
          kernels::WgmmaFp8Params p;
          p.w = &map;
          p.w_scale = ws.get();
          p.x = x.get();
          p.x_scale = xs.get();
          if (f32_out) p.out_f32 = out32.get(); else p.out_bf16 = out16.get();
          p.n = s.n;
          p.k = s.k;
          p.m = m;
          p.variant = v;
          SetGrid(p, grid, scratch);
          ASSERT_EQ(kernels::LaunchWgmmaFp8(p, nullptr), "");
          CUDA_OK(cudaDeviceSynchronize());
          const std::vector<float> got = f32_out ? out32.Download() : gpu_test::ToFloat(out16.Download());
          int wrong = 0;
          for (int b = 0; b < m; ++b) {
            for (int j = 0; j < s.n; ++j) {
              const float exact = pat.expect[size_t(b) * s.n + j], have = got[size_t(b) * s.n + j];
              const float want = f32_out ? exact : gpu_test::ToF(gpu_test::ToB(exact));  // bf16 rounds past 256
              if (have == want) continue;
              if (wrong++ == 0) {
                ADD_FAILURE() << "first wrong: row " << j << " token " << b << " expected " << want << " got "
                              << have;
              }
            }
          }
          EXPECT_EQ(wrong, 0) << "wrong outputs of " << m * s.n;
        }
      }
    }
  }
}

// Same launch three times, and twice from a CUDA graph: identical bits, and
// the split counters back at zero after each. Then x rewritten by the
// quantizer launched just before (PDL: the producer must wait for it before
// loading x) gives the new result.
TEST(WgmmaFp8Test, RepeatedLaunchesAndGraphReplaysAreBitIdentical) {
  GEMMA_REQUIRE_GPU();
  const Shape s{4099, 1040};
  Fp8Matrix w(s, 11);
  kernels::WgmmaFp8Weights map;
  ASSERT_EQ(kernels::MakeWgmmaFp8Weights(w.w8.get(), s.n, s.k, &map), "");
  Tokens x(s, w);
  Scratch scratch(s.n);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int v = 0; v < kernels::NumWgmmaFp8Variants(); ++v) {
    for (int grid : {1, 5, -37}) {
      SCOPED_TRACE(testing::Message() << kernels::WgmmaFp8VariantName(v) << " " << GridName(grid));
      const int m = std::min(kernels::WgmmaFp8VariantMaxM(v), 37);
      DeviceArray<float> out(size_t(m) * s.n);
      kernels::WgmmaFp8Params p = Params(s, w, map, x, m, v, grid, scratch);
      p.out_f32 = out.get();
      std::vector<float> first;
      for (int rep = 0; rep < 3; ++rep) {
        out.Poison();
        ASSERT_EQ(kernels::LaunchWgmmaFp8(p, stream), "");
        CUDA_OK(cudaStreamSynchronize(stream));
        const std::vector<float> got = out.Download();
        if (rep == 0) {
          first = got;
        } else {
          ASSERT_EQ(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)), 0) << "launch " << rep;
        }
      }
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      const std::string launched = kernels::LaunchWgmmaFp8(p, stream);
      CUDA_OK(cudaStreamEndCapture(stream, &graph));
      ASSERT_EQ(launched, "");
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      for (int rep = 0; rep < 2; ++rep) {
        out.Poison();
        CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        const std::vector<float> got = out.Download();
        ASSERT_EQ(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)), 0) << "replay " << rep;
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      std::vector<int> counters(scratch.num_counters);
      CUDA_OK(cudaMemcpy(counters.data(), scratch.counters.get(), counters.size() * sizeof(int),
                         cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < counters.size(); ++i) ASSERT_EQ(counters[i], 0) << "counter " << i;
    }
  }

  // x rewritten right before (no synchronization in between): each round
  // quantizes a token set other than the one the buffer holds.
  const int m = 16;
  std::vector<std::unique_ptr<DeviceArray<__nv_bfloat16>>> sets;
  for (int i = 0; i < 2; ++i) {
    sets.push_back(std::make_unique<DeviceArray<__nv_bfloat16>>(
        gpu_test::ToBf16(gpu_test::RandomFloats(size_t(m) * s.k, 0.0f, 2.0f))));
  }
  DeviceArray<float> out(size_t(m) * s.n);
  for (int round = 0; round < 6; ++round) {
    const int grid = round % 3 == 0 ? 1 : round % 3 == 1 ? 5 : -37;
    kernels::WgmmaFp8Params p = Params(s, w, map, x, m, kernels::WgmmaFp8DefaultVariant(m), grid, scratch);
    p.out_f32 = out.get();
    ASSERT_EQ(kernels::LaunchWgmmaFp8(p, stream), "");
    ASSERT_EQ(kernels::LaunchQuantizeRowsFp8({sets[round % 2]->get(), x.x8.get(), x.xs.get(), m, s.k}, stream), "");
    ASSERT_EQ(kernels::LaunchWgmmaFp8(p, stream), "");
    CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<float> got = out.Download();
    const std::vector<uint8_t> xc = x.x8.Download();
    const std::vector<float> xsc = x.xs.Download();
    std::vector<double> ref, have;
    for (int r = 0; r < s.n; r += 7) {
      for (int b = 0; b < m; ++b) {
        double acc = 0;
        for (int c = 0; c < s.k; ++c) acc += double(Decode(w.codes[size_t(r) * s.k + c])) * Decode(xc[size_t(b) * s.k + c]);
        ref.push_back(acc * w.scales[r] * xsc[b]);
        have.push_back(got[size_t(b) * s.n + r]);
      }
    }
    // A stale x (the other token set) errs by order 1.
    EXPECT_LT(gpu_test::RelErr(have, ref, 0, ref.size()), Tolerance(p.variant, true)) << "round " << round;
  }
  cudaStreamDestroy(stream);
}

TEST(WgmmaFp8Test, RejectsBadParams) {
  alignas(16) uint8_t bytes[32] = {};
  uint8_t& byte = bytes[0];
  float f = 0;
  kernels::WgmmaFp8Weights map;
  EXPECT_NE(kernels::MakeWgmmaFp8Weights(nullptr, 64, 32, &map).find("null weights"), std::string::npos);
  EXPECT_NE(kernels::MakeWgmmaFp8Weights(&byte, 64, 24, &map).find("multiple of 16"), std::string::npos);
  EXPECT_NE(kernels::MakeWgmmaFp8Weights(&byte + 1, 64, 32, &map).find("16-byte aligned"), std::string::npos);

  map.w = &byte;  // a hand-made map: validation only, nothing is launched
  map.n = 64;
  map.k = 32;
  kernels::WgmmaFp8Params p;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("null weights"), std::string::npos);
  p.w = &map;
  p.w_scale = &f;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("null input"), std::string::npos);
  p.x = &byte;
  p.x_scale = &f;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("exactly one output"), std::string::npos);
  p.out_f32 = &f;
  p.out_bf16 = reinterpret_cast<__nv_bfloat16*>(&f);
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("exactly one output"), std::string::npos);
  p.out_bf16 = nullptr;
  p.n = 64;
  p.k = 24;
  p.m = 1;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("multiple of 16"), std::string::npos);
  p.k = 48;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("shape differs"), std::string::npos);
  p.k = 32;
  p.x = &byte + 1;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("16-byte aligned"), std::string::npos);
  p.x = &byte;
  p.variant = kernels::NumWgmmaFp8Variants();
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("unknown variant"), std::string::npos);
  p.variant = 0;  // a 16-token tile
  ASSERT_EQ(kernels::WgmmaFp8VariantMaxM(0), 16);
  p.m = 17;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("m out of range"), std::string::npos);
  p.m = 0;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("m out of range"), std::string::npos);
  p.variant = -1;
  p.m = kernels::kWgmmaFp8MaxM + 1;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("m out of range"), std::string::npos);
  p.m = 4;
  p.out_f32 = nullptr;
  p.out_bf16 = reinterpret_cast<__nv_bfloat16*>(&f);
  p.softcap = 30.0f;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("softcap needs fp32"), std::string::npos);
  p.softcap = 0.0f;
  p.splits = 0;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("splits must be"), std::string::npos);
  p.splits = kernels::kWgmmaFp8MaxSplits + 1;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("splits must be"), std::string::npos);
  p.splits = 2;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("needs workspace"), std::string::npos);
  p.streamk_ctas = 8;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("stream-K takes splits = 1"), std::string::npos);
  p.splits = 1;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("stream-K needs workspace"), std::string::npos);
  p.streamk_ctas = -1;
  EXPECT_NE(kernels::LaunchWgmmaFp8(p, nullptr).find("streamk_ctas must be >= 0"), std::string::npos);
  p.streamk_ctas = 0;

  // Sizes: the workspace covers every variant, the counters every row tiling.
  EXPECT_EQ(kernels::WgmmaFp8WorkspaceFloats(-1, 1000, 1), 0u);
  for (int v = 0; v < kernels::NumWgmmaFp8Variants(); ++v) {
    EXPECT_LE(kernels::WgmmaFp8WorkspaceFloats(v, 1000, 3), kernels::WgmmaFp8WorkspaceFloats(-1, 1000, 3));
    EXPECT_LE(kernels::WgmmaFp8StreamKWorkspaceFloats(v, 10), kernels::WgmmaFp8StreamKWorkspaceFloats(-1, 10));
    EXPECT_EQ(kernels::WgmmaFp8StreamKWorkspaceFloats(v, 0), 0u);
    EXPECT_LE(kernels::WgmmaFp8RowTiles(v, 1000), kernels::WgmmaFp8RowTiles(-1, 1000));
    EXPECT_EQ(kernels::WgmmaFp8RowsPerCta(v) % kernels::kWgmmaFp8BoxRows, 0);
    EXPECT_TRUE(kernels::WgmmaFp8VariantSupportsM(kernels::WgmmaFp8DefaultVariant(kernels::WgmmaFp8VariantMaxM(v)),
                                                  kernels::WgmmaFp8VariantMaxM(v)));
  }
}

}  // namespace
}  // namespace gemma
