// gemv-fp8-bench: decode GEMV bandwidth, bf16 vs FP8 E4M3 weights, on the
// Gemma 4 31B linear shapes (or "n x k" pairs given as arguments), batch
// 1, 2, 4, 8. Every tiling of each kernel is timed; the fastest is reported
// as weight bytes / time (x is tiny and L2-resident). fp8 has two kernel
// families: E4M3 activations (the quantizer's time is printed apart: the
// engine fuses it into the producing norm / gelu gate, except for o_proj)
// and a16 (bf16 activations, no quantizer). On the default shapes a last line
// sums the batch-1 fp8 GEMVs of one 31B token the way the engine picks them.
//
//   gemv-fp8-bench [n k]...
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

#include "kernels/bench/mean_launch_ms.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_fp8.h"
#include "kernels/init/random_init.h"
#include "kernels/quant/fp8_quant.h"

namespace {

using gemma::kernels::kGemvMaxBatch;

double TimeUs(const std::function<void()>& launch) {
  return 1e3 * gemma::kernels::bench::MeanLaunchMs(launch, 3, 20);
}

struct Buffers {
  __nv_bfloat16 *w = nullptr, *x = nullptr;
  uint8_t *w8 = nullptr, *x8 = nullptr;
  float *ws = nullptr, *xs = nullptr;
  __nv_bfloat16* out = nullptr;
};

bool Allocate(Buffers& b, int n, int k) {
  return cudaMalloc(&b.w, size_t(n) * k * 2) == cudaSuccess &&
         cudaMalloc(&b.x, size_t(kGemvMaxBatch) * k * 2) == cudaSuccess &&
         cudaMalloc(&b.w8, size_t(n) * k) == cudaSuccess && cudaMalloc(&b.x8, size_t(kGemvMaxBatch) * k) == cudaSuccess &&
         cudaMalloc(&b.ws, size_t(n) * 4) == cudaSuccess && cudaMalloc(&b.xs, kGemvMaxBatch * 4) == cudaSuccess &&
         cudaMalloc(&b.out, size_t(kGemvMaxBatch) * n * 2) == cudaSuccess;
}

void Free(Buffers& b) {
  for (void* p : {(void*)b.w, (void*)b.x, (void*)b.w8, (void*)b.x8, (void*)b.ws, (void*)b.xs, (void*)b.out}) cudaFree(p);
}

// Batch-1 fp8 microseconds of one shape: the better of E4M3 (+ quantizer when
// `unfused`) and a16; -1 when it could not run.
double BenchShape(int n, int k, bool unfused) {
  Buffers b;
  if (!Allocate(b, n, k)) {
    std::printf("%6d x %5d  out of memory\n", n, k);
    Free(b);
    return -1;
  }
  gemma::kernels::RandomFillParams rp;
  rp.out_bf16 = b.w;
  rp.count = int64_t(n) * k;
  gemma::kernels::LaunchRandomFill(rp, nullptr);
  rp.out_bf16 = b.x;
  rp.count = int64_t(kGemvMaxBatch) * k;
  rp.stddev = 1.0f;
  gemma::kernels::LaunchRandomFill(rp, nullptr);
  gemma::kernels::QuantizeRowsFp8Params q{b.w, b.w8, b.ws, n, k};
  gemma::kernels::LaunchQuantizeRowsFp8(q, nullptr);
  double token_us = -1;
  for (int batch : {1, 2, 4, 8}) {
    double bf16_us = 1e30, fp8_us[2] = {1e30, 1e30};
    int bf16_v = -1, fp8_v[2] = {-1, -1};
    for (int v = 0; v < gemma::kernels::NumGemvVariants(); ++v) {
      if (!gemma::kernels::GemvVariantSupportsBatch(v, batch)) continue;
      gemma::kernels::GemvParams p;
      p.w = b.w;
      p.x = b.x;
      p.out_bf16 = b.out;
      p.n = n;
      p.k = k;
      p.batch = batch;
      p.variant = v;
      const double us = TimeUs([&] { gemma::kernels::LaunchGemv(p, nullptr); });
      if (us < bf16_us) bf16_us = us, bf16_v = v;
    }
    gemma::kernels::QuantizeRowsFp8Params qx{b.x, b.x8, b.xs, batch, k};
    const double quant_us = TimeUs([&] { gemma::kernels::LaunchQuantizeRowsFp8(qx, nullptr); });
    for (int v = 0; v < gemma::kernels::NumGemvFp8Variants(); ++v) {
      gemma::kernels::GemvFp8Params p;
      p.w = b.w8;
      p.w_scale = b.ws;
      p.x = b.x8;
      p.x_scale = b.xs;
      p.x_bf16 = b.x;
      p.out_bf16 = b.out;
      p.n = n;
      p.k = k;
      p.batch = batch;
      p.variant = v;
      const int family = gemma::kernels::GemvFp8VariantTakesBf16(v) ? 1 : 0;
      const double us = TimeUs([&] { gemma::kernels::LaunchGemvFp8(p, nullptr); });
      if (us < fp8_us[family]) fp8_us[family] = us, fp8_v[family] = v;
    }
    const double bytes = double(n) * k;
    const double best_us = std::min(fp8_us[0] + (unfused ? quant_us : 0.0), fp8_us[1]);
    if (batch == 1) token_us = best_us;
    std::printf("gemv-fp8 %6d x %5d b%d  bf16 %-7s %7.1f us %5.2f TB/s | e4m3 %-8s %6.1f us %5.2f TB/s "
                "(+quant %.1f us%s) | a16 %-12s %6.1f us %5.2f TB/s | speedup %.2fx\n",
                n, k, batch, gemma::kernels::GemvVariantName(bf16_v), bf16_us, 2 * bytes / bf16_us / 1e6,
                gemma::kernels::GemvFp8VariantName(fp8_v[0]), fp8_us[0], bytes / fp8_us[0] / 1e6, quant_us,
                unfused ? "" : ", fused", gemma::kernels::GemvFp8VariantName(fp8_v[1]), fp8_us[1],
                bytes / fp8_us[1] / 1e6, bf16_us / best_us);
  }
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) std::printf("CUDA error: %s\n", cudaGetErrorString(err));
  Free(b);
  return token_us;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<int, int>> shapes = {
      {16384, 5376},  // sliding qkv (32 + 2 x 16 heads x 256)
      {18432, 5376},  // global qkv (32 + 4 heads x 512, k = v)
      {5376, 8192},   // sliding o_proj
      {5376, 16384},  // global o_proj
      {43008, 5376},  // gate_up
      {5376, 21504},  // down_proj
  };
  if (argc > 1) {
    shapes.clear();
    for (int i = 1; i + 1 < argc; i += 2) shapes.push_back({std::atoi(argv[i]), std::atoi(argv[i + 1])});
    for (const auto& [n, k] : shapes) BenchShape(n, k, true);
    return 0;
  }
  // o_proj (k = heads x head_dim) is the only linear whose input is not
  // quantized by its producer.
  std::vector<double> us;
  for (const auto& [n, k] : shapes) us.push_back(BenchShape(n, k, k == 8192 || k == 16384));
  // 31B: 50 sliding + 10 global layers; gate_up and down_proj in all 60.
  const int count[] = {50, 10, 50, 10, 60, 60};
  double token_ms = 0, token_gb = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    token_ms += count[i] * us[i] / 1e3;
    token_gb += count[i] * double(shapes[i].first) * shapes[i].second / 1e9;
  }
  std::printf("gemv-fp8 31B decode token, batch 1: fp8 GEMVs %.2f ms (%.1f GB at %.2f TB/s, kernels "
              "timed back to back; the LM head stays bf16)\n",
              token_ms, token_gb, token_gb / token_ms);
  return 0;
}
