// y[m, n] = x[m, k] . w[n, k]^T for bf16 weights in nn.Linear layout. Up to
// kGemvMaxBatch rows run the bandwidth-bound GEMV kernel (decode); more rows
// run a cuBLASLt bf16 GEMM with fp32 accumulation (prefill). Decode is
// graph-safe: no allocation or synchronization after construction; a GEMM's
// first use of a shape plans it (and for the full pass size, times it).
// Thread-safety: owned by the backend's thread.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/lt_gemm.h"

namespace gemma::cuda {

struct LinearArgs {
  const __nv_bfloat16* w = nullptr;  // [n, k]
  const __nv_bfloat16* x = nullptr;  // [m, k]
  __nv_bfloat16* out_bf16 = nullptr; // [m, n], or
  float* out_f32 = nullptr;          // [m, n]
  int m = 0, n = 0, k = 0;
  float softcap = 0.0f;              // > 0: cap * tanh(y / cap) (fp32 out only)
};

class LinearRunner {
 public:
  // `autotune`: time GEMM algorithms for m == tune_m (and GEMV tilings in
  // Autotune()).
  static absl::StatusOr<std::unique_ptr<LinearRunner>> Create(bool autotune, int tune_m);
  absl::Status Run(const LinearArgs& a, cudaStream_t stream);

  // Times every GEMV variant that supports `batch` (CUDA-core tilings, plus the
  // tensor-core ones for batch >= 2) for (n, k, batch); remembers the fastest.
  // Not graph-safe: call before capture. `scratch_*` are device buffers of
  // at least n*k (w), batch*k (x) and batch*n (out) elements.
  absl::Status Autotune(int n, int k, int batch, const __nv_bfloat16* w, const __nv_bfloat16* x,
                        float* out, cudaStream_t stream);
  int num_tuned() const { return static_cast<int>(best_.size()); }

 private:
  LinearRunner() = default;
  int VariantFor(int n, int k, int batch) const;

  DeviceBuffer workspace_;
  std::unique_ptr<LtGemm> gemm_;
  std::map<std::tuple<int, int, int>, int> best_;  // (n, k, batch) -> GEMV variant
};

}  // namespace gemma::cuda
