#include "engine/tools/bench/gemv_bench.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <set>
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

GemvBenchRow BenchShape(int n, int k, cudaEvent_t a, cudaEvent_t b) {
  GemvBenchRow row{n, k, "", 0, 0};
  __nv_bfloat16 *w = nullptr, *x = nullptr, *out = nullptr;
  if (cudaMalloc(&w, size_t(n) * k * 2) != cudaSuccess || cudaMalloc(&x, size_t(k) * 2) != cudaSuccess ||
      cudaMalloc(&out, size_t(n) * 2) != cudaSuccess) {
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
  rp.count = k;
  rp.stddev = 1.0f;
  kernels::LaunchRandomFill(rp, nullptr);
  double best = 1e30;
  for (int v = 0; v < kernels::NumGemvVariants(); ++v) {
    kernels::GemvParams p;
    p.w = w;
    p.x = x;
    p.out_bf16 = out;
    p.n = n;
    p.k = k;
    p.batch = 1;
    p.variant = v;
    const double us = TimeVariant(p, a, b);
    if (us < best) {
      best = us;
      row.variant = kernels::GemvVariantName(v);
    }
  }
  row.us = best;
  row.tb_s = double(n) * k * 2 / (best * 1e-6) / 1e12;
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
