#include "bench/engine/gemv_bench.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <set>
#include <string>
#include <utility>

#include "kernels/gemv/gemv.h"
#include "kernels/init/random_init.h"

namespace gemma {
namespace {

// Median-free but warm: 3 untimed calls, then the mean of 20.
double TimeVariant(const kernels::GemvParams& p, cudaEvent_t a, cudaEvent_t b) {
  for (int i = 0; i < 3; ++i) kernels::LaunchGemv(p, nullptr);
  constexpr int kReps = 20;
  cudaEventRecord(a);
  for (int i = 0; i < kReps; ++i) kernels::LaunchGemv(p, nullptr);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return 1e3 * ms / kReps;
}

struct Best {
  std::string variant = "-";
  double us = 0;
};

// Fastest variant for `batch` among the CUDA-core (tensor_cores false) or the
// tensor-core tilings.
Best BestOf(kernels::GemvParams p, int batch, bool tensor_cores, cudaEvent_t a, cudaEvent_t b) {
  Best best;
  double best_us = 1e30;
  for (int v = 0; v < kernels::NumGemvVariants(); ++v) {
    if (kernels::GemvVariantUsesTensorCores(v) != tensor_cores || !kernels::GemvVariantSupportsBatch(v, batch))
      continue;
    p.batch = batch;
    p.variant = v;
    const double us = TimeVariant(p, a, b);
    if (us < best_us) {
      best_us = us;
      best.variant = kernels::GemvVariantName(v);
    }
  }
  if (best_us < 1e30) best.us = best_us;
  return best;
}

// Batch 1 goes into the returned row; batches 2, 4 and 8 (CUDA-core vs
// tensor-core tilings, weight bytes / time) are printed as `gemv-batch` lines.
GemvBenchRow BenchShape(int n, int k, cudaEvent_t a, cudaEvent_t b) {
  GemvBenchRow row{n, k, "", 0, 0};
  constexpr int kMaxB = kernels::kGemvMaxBatch;
  __nv_bfloat16 *w = nullptr, *x = nullptr, *out = nullptr;
  if (cudaMalloc(&w, size_t(n) * k * 2) != cudaSuccess || cudaMalloc(&x, size_t(kMaxB) * k * 2) != cudaSuccess ||
      cudaMalloc(&out, size_t(kMaxB) * n * 2) != cudaSuccess) {
    row.variant = "oom";
    cudaFree(w);
    cudaFree(x);
    return row;
  }
  kernels::RandomFillParams rp;  // never time on zeros
  rp.out_bf16 = w;
  rp.count = int64_t(n) * k;
  kernels::LaunchRandomFill(rp, nullptr);
  rp.out_bf16 = x;
  rp.count = int64_t(kMaxB) * k;
  rp.stddev = 1.0f;
  kernels::LaunchRandomFill(rp, nullptr);
  kernels::GemvParams p;
  p.w = w;
  p.x = x;
  p.out_bf16 = out;
  p.n = n;
  p.k = k;
  const double bytes = double(n) * k * 2;
  const Best one = BestOf(p, 1, false, a, b);
  row.variant = one.variant;
  row.us = one.us;
  row.tb_s = bytes / (one.us * 1e-6) / 1e12;
  for (int batch : {2, 4, 8}) {
    const Best simt = BestOf(p, batch, false, a, b);
    const Best mma = BestOf(p, batch, true, a, b);
    std::printf("gemv-batch %6d x %5d  b=%d  cuda-cores %-6s %8.1f us %5.2f TB/s  tensor-cores %-6s %8.1f us %5.2f TB/s\n",
                n, k, batch, simt.variant.c_str(), simt.us, bytes / (simt.us * 1e-6) / 1e12, mma.variant.c_str(),
                mma.us, bytes / (mma.us * 1e-6) / 1e12);
  }
  std::fflush(stdout);
  cudaFree(w);
  cudaFree(x);
  cudaFree(out);
  return row;
}

}  // namespace

std::vector<GemvBenchRow> RunGemvBench(const ModelConfig& c) {
  std::set<std::pair<int, int>> shapes;
  for (const LayerSpec& s : c.layers) {
    const int q = c.num_heads * s.head_dim;
    shapes.insert({q + s.num_kv_heads * s.head_dim * (s.k_eq_v ? 1 : 2), c.hidden_size});
    shapes.insert({c.hidden_size, q});
  }
  shapes.insert({2 * c.intermediate_size, c.hidden_size});
  shapes.insert({c.hidden_size, c.intermediate_size});
  shapes.insert({c.vocab_size, c.hidden_size});
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<GemvBenchRow> rows;
  for (const auto& [n, k] : shapes) rows.push_back(BenchShape(n, k, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return rows;
}

}  // namespace gemma
