// gemv-fp8-bench: decode GEMV bandwidth, bf16 vs FP8 E4M3 weights, on the
// Gemma 4 31B linear shapes (or "n x k" pairs given as arguments), batch
// 1, 2, 4, 8. Every tiling of each kernel is timed; the fastest is reported
// as weight bytes / time (x is tiny and L2-resident). fp8 has two kernel
// families: E4M3 activations (the quantizer's time is printed apart: the
// engine fuses it into the producing norm / gelu gate, except for o_proj)
// and a16 (bf16 activations, no quantizer). On the default shapes a last line
// sums the batch-1 fp8 GEMVs of one 31B token the way the engine picks them.
// GEMV times are of back-to-back launches on one weight buffer (a matrix that
// fits the L2 may partly be read from there).
//
// Per shape, m = 16, 32, 64 tokens then run the wgmma FP8 linear
// (kernels/gemv/wgmma_fp8.h, the decode batches above the GEMV's 8): the
// fastest variant x K split and the fastest variant x stream-K grid (as
// many CTAs per SM as fit), timed while rotating through enough weight copies (each with
// its own TMA map) to keep them out of L2 (what a decode step sees), each
// launch followed by a one-block PDL stand-in kernel (as a decode step
// follows a linear with a small kernel; GEMMA_BENCH_BACK_TO_BACK=1 leaves it
// out), and the split choice back to back on one buffer.
// GEMMA_BENCH_WGMMA_ALL=1 prints every candidate (and times every variant,
// not only the narrowest token tile that covers m); GEMMA_BENCH_WGMMA_ONLY=1
// leaves the batch 1..8 GEMVs out, GEMMA_BENCH_NO_WGMMA=1 the wgmma rows.
//
//   gemv-fp8-bench [n k]...
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernels/mean_launch_ms.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_fp8.h"
#include "kernels/gemv/wgmma_fp8.h"
#include "kernels/init/random_init.h"
#include "kernels/quant/fp8_quant.h"

namespace {

using gemma::kernels::kGemvMaxBatch;

bool EnvFlag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] == '1';
}

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

void BenchWgmma(const Buffers& b, int n, int k);

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
    if (EnvFlag("GEMMA_BENCH_WGMMA_ONLY")) break;
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
  if (!EnvFlag("GEMMA_BENCH_NO_WGMMA")) BenchWgmma(b, n, k);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) std::printf("CUDA error: %s\n", cudaGetErrorString(err));
  Free(b);
  return token_us;
}

// wgmma FP8 linear at m = 16, 32, 64 on b's E4M3 weights (see the header).
void BenchWgmma(const Buffers& b, int n, int k) {
  namespace kn = gemma::kernels;
  constexpr int kMaxM = 64;
  constexpr int kSplits[] = {1, 2, 3, 4, 6, 8, 12, 16};
  const size_t bytes = size_t(n) * k;
  // Copies so that one rotation streams >= 200 MB (4x the L2), at most 8.
  const int copies = int(std::min<size_t>(8, std::max<size_t>(1, (200000000 + bytes - 1) / bytes)));
  std::vector<uint8_t*> w(copies, nullptr);
  std::vector<kn::WgmmaFp8Weights> maps(copies);
  uint8_t* x8 = nullptr;
  float *xs = nullptr, *workspace = nullptr;
  int* counters = nullptr;
  __nv_bfloat16* out = nullptr;
  const int row_tiles = kn::WgmmaFp8RowTiles(-1, n);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const bool stand_in = !EnvFlag("GEMMA_BENCH_BACK_TO_BACK");
  bool ok = cudaMalloc(&x8, size_t(kMaxM) * k) == cudaSuccess && cudaMalloc(&xs, kMaxM * 4) == cudaSuccess &&
            cudaMalloc(&out, size_t(kMaxM) * n * 2) == cudaSuccess &&
            cudaMalloc(&workspace, std::max(kn::WgmmaFp8WorkspaceFloats(-1, n, kn::kWgmmaFp8MaxSplits),
                                            kn::WgmmaFp8StreamKWorkspaceFloats(-1, 2 * sms)) * 4) == cudaSuccess &&
            cudaMalloc(&counters, row_tiles * 4) == cudaSuccess;
  w[0] = b.w8;
  for (int c = 1; c < copies && ok; ++c) {
    ok = cudaMalloc(&w[c], bytes) == cudaSuccess && cudaMemcpy(w[c], b.w8, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess;
  }
  for (int c = 0; c < copies && ok; ++c) {
    const std::string err = kn::MakeWgmmaFp8Weights(w[c], n, k, &maps[c]);
    if (!err.empty()) {
      std::printf("wgmma-fp8 %6d x %5d: %s\n", n, k, err.c_str());
      ok = false;
    }
  }
  if (ok) {
    cudaMemset(counters, 0, row_tiles * 4);
    gemma::kernels::RandomFillParams rp;
    rp.out_bf16 = b.x;  // 8 random rows, quantized 8 times over into the 64 token rows
    rp.count = int64_t(kGemvMaxBatch) * k;
    rp.stddev = 1.0f;
    kn::LaunchRandomFill(rp, nullptr);
    for (int r = 0; r < kMaxM; r += kGemvMaxBatch) {
      kn::QuantizeRowsFp8Params q{b.x, x8 + size_t(r) * k, xs + r, kGemvMaxBatch, k};
      kn::LaunchQuantizeRowsFp8(q, nullptr);
    }
  }
  const bool all = EnvFlag("GEMMA_BENCH_WGMMA_ALL");
  for (int m : {16, 32, 64}) {
    if (!ok) {
      std::printf("wgmma-fp8 %6d x %5d m%d  out of memory\n", n, k, m);
      break;
    }
    int narrowest = kn::kWgmmaFp8MaxM;  // the narrowest token tile covering m
    for (int v = 0; v < kn::NumWgmmaFp8Variants(); ++v) {
      if (kn::WgmmaFp8VariantSupportsM(v, m)) narrowest = std::min(narrowest, kn::WgmmaFp8VariantMaxM(v));
    }
    kn::WgmmaFp8Params p;
    p.w_scale = b.ws;
    p.x = x8;
    p.x_scale = xs;
    p.out_bf16 = out;
    p.n = n;
    p.k = k;
    p.m = m;
    p.workspace = workspace;
    p.counters = counters;
    // Grids: K splits > 0, or -c: stream-K over c CTAs per SM.
    std::vector<int> grids(std::begin(kSplits), std::end(kSplits));
    grids.push_back(-1);
    grids.push_back(-2);
    double best_us[2] = {1e30, 1e30};  // [stream-K]
    int best_v[2] = {-1, -1}, best_g[2] = {1, 1};
    auto set_grid = [&](int grid) {
      p.splits = grid > 0 ? grid : 1;
      p.streamk_ctas = grid < 0 ? -grid * sms : 0;
    };
    auto grid_name = [](int grid) {
      return grid > 0 ? "x" + std::to_string(grid) : "sk" + std::to_string(-grid);
    };
    for (int v = 0; v < kn::NumWgmmaFp8Variants(); ++v) {
      if (!kn::WgmmaFp8VariantSupportsM(v, m) || (kn::WgmmaFp8VariantMaxM(v) != narrowest && !all)) continue;
      for (int grid : grids) {
        if (grid < 0 && -grid != kn::WgmmaFp8CtasPerSm(v)) continue;  // every slot, one wave
        p.variant = v;
        set_grid(grid);
        int i = 0;
        std::string err;
        const double us = TimeUs([&] {
          p.w = &maps[i++ % copies];
          const std::string e = kn::LaunchWgmmaFp8(p, nullptr);
          if (stand_in) kn::LaunchPdlStandIn(nullptr);
          if (err.empty()) err = e;
        });
        if (!err.empty()) {
          std::printf("  wgmma-fp8 %s %s: %s\n", kn::WgmmaFp8VariantName(v), grid_name(grid).c_str(), err.c_str());
          continue;
        }
        if (all) {
          std::printf("  wgmma-fp8 %6d x %5d m%d %-14s %-4s %7.1f us %5.2f TB/s\n", n, k, m,
                      kn::WgmmaFp8VariantName(v), grid_name(grid).c_str(), us, bytes / us / 1e6);
        }
        const int sk = grid < 0;
        if (us < best_us[sk]) best_us[sk] = us, best_v[sk] = v, best_g[sk] = grid;
      }
    }
    for (int sk : {0, 1}) {
      if (best_v[sk] < 0) continue;
      p.variant = best_v[sk];
      set_grid(best_g[sk]);
      p.w = &maps[0];
      const double hot_us = TimeUs([&] { kn::LaunchWgmmaFp8(p, nullptr); });
      std::printf("wgmma-fp8 %6d x %5d m%-2d %-14s %-4s %7.1f us %5.2f TB/s (%d weight copies%s; back to back "
                  "on one: %.1f us %.2f TB/s)\n",
                  n, k, m, kn::WgmmaFp8VariantName(best_v[sk]), grid_name(best_g[sk]).c_str(), best_us[sk],
                  bytes / best_us[sk] / 1e6, copies, stand_in ? ", stand-in after each" : "", hot_us,
                  bytes / hot_us / 1e6);
    }
  }
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) std::printf("CUDA error: %s\n", cudaGetErrorString(err));
  for (int c = 1; c < copies; ++c) cudaFree(w[c]);
  for (void* q : {(void*)x8, (void*)xs, (void*)out, (void*)workspace, (void*)counters}) cudaFree(q);
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
  if (EnvFlag("GEMMA_BENCH_WGMMA_ONLY")) return 0;
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
