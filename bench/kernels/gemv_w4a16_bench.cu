// gemv-w4a16-bench: the W4A16 linear on the Gemma 4 31B shapes (Q4_0, group
// 32, random weights quantized and tiled on the device):
//   1. the W4A16 kernel, batch 1, 2, 4, 8, 16, 32, 64: every tiling that
//      serves the batch timed while rotating through enough weight copies to
//      keep them out of L2; the fastest is reported as tiled code + scale
//      bytes / time, against the read ceiling (4.35 TB/s, read-bw-bench);
//      then the batch-1 sum of one token (50 sliding + 10 global layers, the
//      LM head in int4 and apart) and its read floor, and the 60 layers' sum
//      at every other batch;
//   2. the path above the kernel's rows, m = 128..2048: dequantize to bf16 +
//      cuBLAS bf16 GEMM, TFLOP/s of the GEMM alone and of both
//      (GEMMA_BENCH_NO_GEMM=1 leaves it out).
//   GEMMA_BENCH_ALL_TILINGS=1 prints every tiling's time as well.
//   GEMMA_BENCH_CHAIN=1 instead: one sliding layer's linears as a batch-1
//   decode step runs them (o_proj, gate|up with the gelu gate, down, the
//   next QKV; four layer copies, so each streams from HBM), the best tiling
//   of each launched one after another against the chain kernel
//   (kernels/gemv/w4a16_chain.h: one launch per layer, and one launch for
//   all four layers), microseconds per layer against the read floor; then
//   the same with the two residual norms between them (kernels of their own
//   against the chain's norm stages).
//   gemv-w4a16-bench [n k]...
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/kernels/mean_launch_ms.h"
#include "kernels/gemv/gemv_w4a16.h"
#include "kernels/gemv/w4a16_chain.h"
#include "kernels/init/random_init.h"
#include "kernels/norm/residual_norm.h"
#include "kernels/quant/w4_quant.h"

namespace {

namespace k = gemma::kernels;
constexpr double kCeilingTBs = 4.35;

struct Shape {
  const char* name;
  int n, k;
};
const Shape kShapes[] = {{"qkv-sliding", 16384, 5376}, {"qkv-global", 18432, 5376}, {"o-sliding", 5376, 8192},
                         {"o-global", 5376, 16384},    {"gate-up", 43008, 5376},    {"down", 5376, 21504},
                         {"lm-head", 262144, 5376}};

#define CHECK_CUDA(x)                                                              \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

struct Weights {
  int n = 0, kk = 0, copies = 0;
  size_t packed_bytes = 0, scale_bytes = 0;
  std::vector<uint8_t*> w;
  std::vector<__half*> sc;
  double bytes() const { return double(packed_bytes + scale_bytes); }
};

Weights MakeWeights(int n, int kk) {
  Weights wt;
  wt.n = n;
  wt.kk = kk;
  wt.packed_bytes = size_t(k::W4TiledCodeBytes(n, kk));
  wt.scale_bytes = size_t(k::W4TiledScaleBytes(n, kk));
  wt.copies = int(std::max<double>(1, 400e6 / wt.bytes() + 1));
  __nv_bfloat16* tmp = nullptr;
  CHECK_CUDA(cudaMalloc(&tmp, size_t(n) * kk * 2));
  k::RandomFillParams rp;
  rp.out_bf16 = tmp;
  rp.count = int64_t(n) * kk;
  rp.seed = 1234;
  if (auto e = k::LaunchRandomFill(rp, nullptr); !e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
  for (int c = 0; c < wt.copies; ++c) {
    uint8_t* w = nullptr;
    __half* s = nullptr;
    CHECK_CUDA(cudaMalloc(&w, wt.packed_bytes));
    CHECK_CUDA(cudaMalloc(&s, wt.scale_bytes));
    if (c == 0) {
      // Q4_0 in the row layout, then tiled.
      uint8_t* row_w = nullptr;
      __half* row_s = nullptr;
      CHECK_CUDA(cudaMalloc(&row_w, size_t(n) * k::W4PaddedK(kk) / 2));
      CHECK_CUDA(cudaMalloc(&row_s, size_t(n) * k::W4PaddedK(kk) / 32 * 2));
      if (auto e = k::LaunchQuantizeQ4_0({tmp, nullptr, row_w, row_s, n, kk}, nullptr); !e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
      if (auto e = k::LaunchTileW4({row_w, row_s, 32, w, s, n, kk}, nullptr); !e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
      CHECK_CUDA(cudaDeviceSynchronize());
      CHECK_CUDA(cudaFree(row_w));
      CHECK_CUDA(cudaFree(row_s));
    } else {
      CHECK_CUDA(cudaMemcpy(w, wt.w[0], wt.packed_bytes, cudaMemcpyDeviceToDevice));
      CHECK_CUDA(cudaMemcpy(s, wt.sc[0], wt.scale_bytes, cudaMemcpyDeviceToDevice));
    }
    wt.w.push_back(w);
    wt.sc.push_back(s);
  }
  CHECK_CUDA(cudaFree(tmp));
  CHECK_CUDA(cudaDeviceSynchronize());
  return wt;
}

void FreeWeights(Weights& wt) {
  for (auto* p : wt.w) cudaFree(p);
  for (auto* p : wt.sc) cudaFree(p);
}

// Best microseconds over the tilings at `batch`; `best` gets the tiling's name.
double BenchGemv(const Weights& wt, int batch, const __nv_bfloat16* x, __nv_bfloat16* out, std::string* best) {
  double best_us = 1e30;
  for (int v = 0; v < k::NumGemvW4Variants(); ++v) {
    if (!k::GemvW4VariantFits(v, batch)) continue;
    int i = 0;
    bool ok = true;
    const double us = 1e3 * k::bench::MeanLaunchMs(
                                [&] {
                                  k::GemvW4Params p;
                                  p.w = wt.w[i % wt.copies];
                                  p.scales = wt.sc[i % wt.copies];
                                  ++i;
                                  p.x = x;
                                  p.out_bf16 = out;
                                  p.n = wt.n;
                                  p.k = wt.kk;
                                  p.batch = batch;
                                  p.variant = v;
                                  if (!k::LaunchGemvW4(p, nullptr).empty()) ok = false;
                                },
                                5, 40);
    if (ok && us < best_us) {
      best_us = us;
      *best = k::GemvW4VariantName(v);
    }
    if (ok && std::getenv("GEMMA_BENCH_ALL_TILINGS") != nullptr) {
      std::printf("  tiling %-3d %6dx%-6d b%d  %-16s %8.1f us\n", v, wt.n, wt.kk, batch, k::GemvW4VariantName(v), us);
    }
  }
  return best_us;
}

void BenchGemm(cublasHandle_t h, const Weights& wt, __nv_bfloat16* x, __nv_bfloat16* wbf, __nv_bfloat16* out) {
  for (int m : {128, 256, 512, 1024, 2048}) {
    const float alpha = 1.0f, beta = 0.0f;
    auto gemm = [&] {
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, wt.n, m, wt.kk, &alpha, wbf, CUDA_R_16BF, wt.kk, x, CUDA_R_16BF, wt.kk,
                   &beta, out, CUDA_R_16BF, wt.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    auto dequant = [&] { k::LaunchDequantizeW4({wt.w[0], wt.sc[0], wbf, wt.n, wt.kk}, nullptr); };
    const double g_ms = k::bench::MeanLaunchMs(gemm, 3, 20);
    const double d_ms = k::bench::MeanLaunchMs(dequant, 3, 20);
    const double flop = 2.0 * m * double(wt.n) * wt.kk;
    std::printf("w4-gemm n=%d k=%d m=%-5d dequant %7.1f us  bf16 gemm %8.1f us %6.0f TFLOP/s  both %6.0f TFLOP/s\n",
                wt.n, wt.kk, m, 1e3 * d_ms, 1e3 * g_ms, flop / g_ms / 1e9, flop / (g_ms + d_ms) / 1e9);
  }
}


// One tiled matrix (paired: a gate|up) of random weights quantized to Q4_0.
struct Tiled {
  uint8_t* w = nullptr;
  __half* sc = nullptr;
  double bytes = 0;
};
Tiled MakeTiled(int n, int kk, bool paired, uint64_t seed) {
  Tiled t;
  __nv_bfloat16* tmp = nullptr;
  uint8_t* row_w = nullptr;
  __half* row_s = nullptr;
  CHECK_CUDA(cudaMalloc(&tmp, size_t(n) * kk * 2));
  CHECK_CUDA(cudaMalloc(&row_w, size_t(n) * k::W4PaddedK(kk) / 2));
  CHECK_CUDA(cudaMalloc(&row_s, size_t(n) * k::W4PaddedK(kk) / 32 * 2));
  CHECK_CUDA(cudaMalloc(&t.w, size_t(k::W4TiledCodeBytes(n, kk))));
  CHECK_CUDA(cudaMalloc(&t.sc, size_t(k::W4TiledScaleBytes(n, kk))));
  k::RandomFillParams rp;
  rp.out_bf16 = tmp;
  rp.count = int64_t(n) * kk;
  rp.seed = seed;
  rp.stddev = 1.0f / std::sqrt(float(kk));  // outputs stay O(1) along the chain
  if (auto e = k::LaunchRandomFill(rp, nullptr); !e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
  if (auto e = k::LaunchQuantizeQ4_0({tmp, nullptr, row_w, row_s, n, kk}, nullptr); !e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
  if (auto e = k::LaunchTileW4({row_w, row_s, 32, t.w, t.sc, n, kk, paired}, nullptr); !e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaFree(tmp));
  CHECK_CUDA(cudaFree(row_w));
  CHECK_CUDA(cudaFree(row_s));
  t.bytes = double(k::W4TiledCodeBytes(n, kk) + k::W4TiledScaleBytes(n, kk));
  return t;
}

void BenchChain() {
  constexpr int kLayers = 4, kLin = 4;
  struct Lin {
    const char* name;
    int n, kk;
    bool gelu;
    int in, out;  // buffers: 0 attention output, 1 o_proj out, 2 gelu gate, 3 down out, 4 qkv
  };
  const Lin lins[kLin] = {{"o-sliding", 5376, 8192, false, 0, 1},
                          {"gate-up+gelu", 43008, 5376, true, 1, 2},
                          {"down", 5376, 21504, false, 2, 3},
                          {"qkv-sliding", 16384, 5376, false, 3, 4}};
  const int buf_len[5] = {8192, 5376, 21504, 5376, 16384};
  __nv_bfloat16* buf[5];
  for (int i = 0; i < 5; ++i) CHECK_CUDA(cudaMalloc(&buf[i], size_t(buf_len[i]) * 2));
  k::RandomFillParams rp;
  rp.out_bf16 = buf[0];
  rp.count = buf_len[0];
  rp.seed = 11;
  rp.stddev = 1.0f;
  k::LaunchRandomFill(rp, nullptr);
  Tiled w[kLayers][kLin];
  double layer_bytes = 0;
  for (int l = 0; l < kLayers; ++l) {
    for (int i = 0; i < kLin; ++i) {
      w[l][i] = MakeTiled(lins[i].n, lins[i].kk, lins[i].gelu, 100 + 10 * l + i);
      if (l == 0) layer_bytes += w[l][i].bytes;
    }
  }
  const double floor_us = layer_bytes / kCeilingTBs / 1e6;
  // Residual stream (two fp32 buffers: the chain's norms read one and write
  // the other), the norms' weights, the normed x of the separate kernels.
  constexpr int kHidden = 5376;
  float *res[2], *norm_w[4], *scalar;
  __nv_bfloat16* normed;
  for (auto*& r : res) CHECK_CUDA(cudaMalloc(&r, kHidden * 4));
  for (auto*& nw : norm_w) CHECK_CUDA(cudaMalloc(&nw, kHidden * 4));
  CHECK_CUDA(cudaMalloc(&scalar, 4));
  CHECK_CUDA(cudaMalloc(&normed, kHidden * 2));
  {
    std::vector<float> ones(kHidden, 1.0f);
    for (auto* r : res) CHECK_CUDA(cudaMemcpy(r, ones.data(), kHidden * 4, cudaMemcpyHostToDevice));
    for (auto* nw : norm_w) CHECK_CUDA(cudaMemcpy(nw, ones.data(), kHidden * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(scalar, ones.data(), 4, cudaMemcpyHostToDevice));
  }
  auto gemv = [&](int l, int i, int variant) {
    k::GemvW4Params p;
    p.w = w[l][i].w;
    p.scales = w[l][i].sc;
    p.x = buf[lins[i].in];
    p.out_bf16 = buf[lins[i].out];
    p.n = lins[i].n;
    p.k = lins[i].kk;
    p.batch = 1;
    p.variant = variant;
    p.paired = p.gelu_gate = lins[i].gelu;
    return k::LaunchGemvW4(p, nullptr);
  };
  // The best tiling of each linear alone (rotating over the layer copies).
  int best[kLin];
  for (int i = 0; i < kLin; ++i) {
    double best_us = 1e30;
    best[i] = -1;
    for (int v = 0; v < k::NumGemvW4Variants(); ++v) {
      if (!k::GemvW4VariantFits(v, 1)) continue;
      int it = 0;
      bool ok = true;
      const double us = 1e3 * k::bench::MeanLaunchMs([&] { ok = gemv(it++ % kLayers, i, v).empty() && ok; }, 8, 80);
      if (ok && us < best_us) best_us = us, best[i] = v;
    }
    std::printf("chain-bench %-13s %6dx%-6d alone  %7.1f us (%s, floor %.1f us)\n", lins[i].name, lins[i].n,
                lins[i].kk, best_us, k::GemvW4VariantName(best[i]), w[0][i].bytes / kCeilingTBs / 1e6);
  }
  int it = 0;
  const double sep_us = 1e3 * k::bench::MeanLaunchMs(
                                  [&] {
                                    const int l = it++ % kLayers;
                                    for (int i = 0; i < kLin; ++i) gemv(l, i, best[i]);
                                  },
                                  8, 200);
  std::vector<__nv_bfloat16> ref(buf_len[4]), got(buf_len[4]);
  gemv(0, 0, best[0]);
  for (int i = 1; i < kLin; ++i) gemv(0, i, best[i]);
  CHECK_CUDA(cudaMemcpy(ref.data(), buf[4], ref.size() * 2, cudaMemcpyDeviceToHost));
  std::printf("chain-bench layer, four kernels one after another: %7.1f us per layer (floor %.1f us, %3.0f%% of the ceiling)\n",
              sep_us, floor_us, 100 * floor_us / sep_us);

  // With the norms: o_proj, norm, gate|up (on the normed x), down, norm, QKV.
  auto norm = [&](const __nv_bfloat16* branch, int which) {
    k::ResidualNormParams np;
    np.branch = branch;
    np.branch_weight = norm_w[2 * which];
    np.layer_scalar = which == 1 ? scalar : nullptr;
    np.residual = res[0];
    np.out_weight = norm_w[2 * which + 1];
    np.out = normed;
    np.num_tokens = 1;
    np.hidden = kHidden;
    return k::LaunchResidualNorm(np, nullptr);
  };
  auto gemv_on = [&](int l, int i, const __nv_bfloat16* x) {
    k::GemvW4Params p;
    p.w = w[l][i].w;
    p.scales = w[l][i].sc;
    p.x = x;
    p.out_bf16 = buf[lins[i].out];
    p.n = lins[i].n;
    p.k = lins[i].kk;
    p.batch = 1;
    p.variant = best[i];
    p.paired = p.gelu_gate = lins[i].gelu;
    return k::LaunchGemvW4(p, nullptr);
  };
  it = 0;
  const double sep_norm_us = 1e3 * k::bench::MeanLaunchMs(
                                       [&] {
                                         const int l = it++ % kLayers;
                                         gemv_on(l, 0, buf[0]);
                                         norm(buf[1], 0);
                                         gemv_on(l, 1, normed);
                                         gemv_on(l, 2, buf[2]);
                                         norm(buf[3], 1);
                                         gemv_on(l, 3, normed);
                                       },
                                       8, 200);
  std::printf("chain-bench layer with norms, six kernels one after another: %7.1f us per layer (%3.0f%% of the ceiling)\n",
              sep_norm_us, 100 * floor_us / sep_norm_us);

  unsigned* barrier = nullptr;
  CHECK_CUDA(cudaMalloc(&barrier, k::W4ChainBarrierBytes()));
  CHECK_CUDA(cudaMemset(barrier, 0, k::W4ChainBarrierBytes()));
  auto chain_params = [&](int first_layer, int layers, int variant, bool norms = false) {
    k::W4ChainParams p;
    p.barrier = barrier;
    p.variant = variant;
    for (int l = 0; l < layers; ++l) {
      for (int i = 0; i < kLin; ++i) {
        k::W4ChainLinear& c = p.linears[p.count++];
        c.w = w[(first_layer + l) % kLayers][i].w;
        c.scales = w[(first_layer + l) % kLayers][i].sc;
        c.x = buf[lins[i].in];
        c.out = buf[lins[i].out];
        c.n = lins[i].n;
        c.k = lins[i].kk;
        c.paired = c.gelu_gate = lins[i].gelu;
        if (norms && (i == 1 || i == 3)) {
          const int which = i == 1 ? 0 : 1;
          c.x = nullptr;
          c.has_norm = true;
          c.norm.branch = buf[lins[i].in];
          c.norm.branch_weight = norm_w[2 * which];
          c.norm.layer_scalar = which == 1 ? scalar : nullptr;
          c.norm.residual_in = res[which];
          c.norm.residual_out = res[1 - which];
          c.norm.out_weight = norm_w[2 * which + 1];
        }
      }
    }
    return p;
  };
  for (int v = 0; v < k::NumW4ChainVariants(); ++v) {
    std::string err;
    it = 0;
    const double per_layer = 1e3 * k::bench::MeanLaunchMs(
                                       [&] {
                                         const auto e = k::LaunchW4Chain(chain_params(it++ % kLayers, 1, v), nullptr);
                                         if (!e.empty()) err = e;
                                       },
                                       8, 200);
    const double all4 = 1e3 * k::bench::MeanLaunchMs(
                                  [&] {
                                    const auto e = k::LaunchW4Chain(chain_params(0, kLayers, v), nullptr);
                                    if (!e.empty()) err = e;
                                  },
                                  4, 50) / kLayers;
    it = 0;
    const double with_norms = 1e3 * k::bench::MeanLaunchMs(
                                        [&] {
                                          const auto e =
                                              k::LaunchW4Chain(chain_params(it++ % kLayers, 1, v, true), nullptr);
                                          if (!e.empty()) err = e;
                                        },
                                        8, 200);
    const auto e = k::LaunchW4Chain(chain_params(0, 1, v), nullptr);
    if (!e.empty()) err = e;
    CHECK_CUDA(cudaMemcpy(got.data(), buf[4], got.size() * 2, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t j = 0; j < got.size(); ++j) {
      const double d = double(__bfloat162float(got[j])) - double(__bfloat162float(ref[j]));
      num += d * d;
      den += double(__bfloat162float(ref[j])) * __bfloat162float(ref[j]);
    }
    std::printf("chain-bench layer, chain %-8s one launch per layer %7.1f us (%3.0f%%), one for four layers %7.1f us "
                "(%3.0f%%), with the norms %7.1f us; its QKV vs the kernels' rel. %.1e%s%s\n",
                k::W4ChainVariantName(v), per_layer, 100 * floor_us / per_layer, all4, 100 * floor_us / all4, with_norms,
                std::sqrt(num / std::max(den, 1e-30)), err.empty() ? "" : "  ERROR ", err.c_str());
  }
  CHECK_CUDA(cudaGetLastError());
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("GEMMA_BENCH_CHAIN") != nullptr) {
    BenchChain();
    return 0;
  }
  std::vector<Shape> shapes;
  for (int i = 1; i + 1 < argc; i += 2) shapes.push_back({"custom", std::atoi(argv[i]), std::atoi(argv[i + 1])});
  const bool defaults = shapes.empty();
  if (defaults) shapes.assign(std::begin(kShapes), std::end(kShapes));
  const bool gemm = std::getenv("GEMMA_BENCH_NO_GEMM") == nullptr;
  __nv_bfloat16 *x = nullptr, *out = nullptr, *wbf = nullptr;
  const size_t max_k = 21504, max_n = 262144;
  CHECK_CUDA(cudaMalloc(&x, 2048 * max_k * 2));
  CHECK_CUDA(cudaMalloc(&out, 2048 * max_n * 2));
  k::RandomFillParams rp;
  rp.out_bf16 = x;
  rp.count = int64_t(2048) * max_k;
  rp.seed = 7;
  rp.stddev = 1.0f;
  k::LaunchRandomFill(rp, nullptr);
  cublasHandle_t handle = nullptr;
  if (gemm) cublasCreate(&handle);
  constexpr int kBatches[] = {1, 2, 4, 8, 16, 32, 64};
  double shape_us[7][7] = {};  // [shape][batch index]: the best tiling's time
  double shape_bytes[7] = {};
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape& s = shapes[si];
    Weights wt = MakeWeights(s.n, s.k);
    for (int bi = 0; bi < 7; ++bi) {
      const int batch = kBatches[bi];
      std::string best;
      const double us = BenchGemv(wt, batch, x, out, &best);
      const double tbs = wt.bytes() / us / 1e6;
      std::printf("w4-gemv %-12s %6dx%-6d b%d  %8.1f us  %5.2f TB/s  %3.0f%% of ceiling  floor %7.1f us  %s\n", s.name,
                  s.n, s.k, batch, us, tbs, 100 * tbs / kCeilingTBs, wt.bytes() / kCeilingTBs / 1e6, best.c_str());
      if (defaults) {
        shape_us[si][bi] = us;
        shape_bytes[si] = wt.bytes();
      }
    }
    if (gemm && s.n <= 43008) {
      if (!wbf) CHECK_CUDA(cudaMalloc(&wbf, size_t(43008) * max_k * 2));
      BenchGemm(handle, wt, x, wbf, out);
    }
    FreeWeights(wt);
  }
  if (defaults) {
    // Shapes: qkv-s, qkv-g, o-s, o-g, gate-up, down, lm-head; 50 sliding + 10 global layers.
    auto layers = [](const double* v) { return 50 * (v[0] + v[2] + v[4] + v[5]) + 10 * (v[1] + v[3] + v[4] + v[5]); };
    auto layers_at = [&](int bi) {
      double v[7];
      for (int i = 0; i < 7; ++i) v[i] = shape_us[i][bi];
      return layers(v);
    };
    const double layers_us = layers_at(0), layers_bytes = layers(shape_bytes), head_us = shape_us[6][0];
    std::printf("decode token, batch 1: 60 layers' int4 linears %.2f ms (%.2f GB, floor %.2f ms); + int4 LM head %.2f ms "
                "(floor %.2f ms) = %.2f ms -> %.0f tok/s linears only\n",
                layers_us / 1e3, layers_bytes / 1e9, layers_bytes / kCeilingTBs / 1e9, head_us / 1e3,
                shape_bytes[6] / kCeilingTBs / 1e9, (layers_us + head_us) / 1e3, 1e6 / (layers_us + head_us));
    for (int bi = 1; bi < 7; ++bi) {
      std::printf("decode step, batch %d: 60 layers' int4 linears %.2f ms\n", kBatches[bi], layers_at(bi) / 1e3);
    }
  }
  CHECK_CUDA(cudaGetLastError());
  return 0;
}
