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
//   GEMMA_BENCH_ALL_TILINGS=1 prints every tiling's time as well;
//   GEMMA_BENCH_TILING=<name> times only that tiling (at the batches it
//   serves), e.g. under a profiler.
//   gemv-w4a16-bench [n k]...
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/kernels/mean_launch_ms.h"
#include "kernels/gemv/gemv_w4a16.h"
#include "kernels/init/random_init.h"
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
// `partial`: the tilings that may write partial sums (fp32), the split ones
// included, as a consumer that adds them would run them.
double BenchGemv(const Weights& wt, int batch, const __nv_bfloat16* x, __nv_bfloat16* out, std::string* best,
                 bool partial = false) {
  double best_us = 1e30;
  const char* only = std::getenv("GEMMA_BENCH_TILING");
  for (int v = 0; v < k::NumGemvW4Variants(); ++v) {
    if (!k::GemvW4VariantFits(v, batch, partial) || (partial && k::GemvW4VariantSplits(v) == 1)) continue;
    if (only != nullptr && std::string(only) != k::GemvW4VariantName(v)) continue;
    int i = 0;
    bool ok = true;
    const double us = 1e3 * k::bench::MeanLaunchMs(
                                [&] {
                                  k::GemvW4Params p;
                                  p.w = wt.w[i % wt.copies];
                                  p.scales = wt.sc[i % wt.copies];
                                  ++i;
                                  p.x = x;
                                  if (partial) {
                                    p.out_f32 = reinterpret_cast<float*>(out);
                                    p.partial_sums = true;
                                  } else {
                                    p.out_bf16 = out;
                                  }
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

}  // namespace

int main(int argc, char** argv) {
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
      if (batch == 1) {
        std::string split_best;
        const double split_us = BenchGemv(wt, batch, x, out, &split_best, true);
        if (split_us < 1e29) {
          std::printf("w4-gemv %-12s %6dx%-6d b1  %8.1f us  partial sums, best split tiling %s\n", s.name, s.n, s.k,
                      split_us, split_best.c_str());
        }
      }
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
