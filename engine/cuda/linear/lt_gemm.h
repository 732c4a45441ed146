// Prefill GEMM out[m, n] = x[m, k] . w[n, k]^T (bf16 in, or both E4M3 with
// scale 1; fp32 accumulate, bf16 or fp32 out) through cuBLASLt. For the hot shapes (m == tune_m, the
// full prefill pass, and powers of two up to 512, the decode batch buckets)
// the heuristic's top candidates are timed once on the real buffers and the
// fastest kept; other m use the heuristic's first choice. Each shape's
// algorithm is recorded in the Tuner (TunedChoices::gemm_algo), which the
// plan reads on every run. Thread-safety: owned by the backend's thread.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <tuple>

#include "absl/status/statusor.h"
#include "engine/cuda/linear/switches.h"
#include "engine/cuda/linear/tuner.h"

namespace gemma::cuda {

class LtGemm {
 public:
  // `workspace` (device, `workspace_bytes`) and `tuner` must outlive this object.
  static absl::StatusOr<std::unique_ptr<LtGemm>> Create(void* workspace, size_t workspace_bytes,
                                                        bool autotune, int tune_m, Tuner& tuner);
  ~LtGemm();
  absl::Status Run(const void* w, const void* x, void* out, bool out_f32, int m, int n, int k,
                   cudaStream_t stream);
  // E4M3 w and x (REQUIRES: k a multiple of 16): out = w_scale[n] *
  // x_scale[m] * (w . x) through cuBLASLt's outer-vector scale mode for
  // m > 128 when this cuBLASLt offers it for the shape (returns true), else
  // the unscaled product (returns false; the caller applies the scales: also
  // the faster way for skinny decode batches). The mode can be turned off
  // with GEMMA_FP8_OUTER_VEC=0 (switches.h).
  absl::StatusOr<bool> RunFp8(const void* w, const float* w_scale, const void* x, const float* x_scale,
                              void* out, bool out_f32, int m, int n, int k, cudaStream_t stream);

 private:
  struct Plan;
  LtGemm() = default;
  // fp8: w_scale/x_scale non-null; the plan tries the outer-vector scale mode.
  absl::StatusOr<Plan*> GetPlan(const void* w, const void* x, void* out, bool out_f32, int m, int n,
                                int k, cudaStream_t stream, bool fp8_inputs, const float* w_scale,
                                const float* x_scale);
  absl::Status Tune(Plan& plan, const cublasLtMatmulHeuristicResult_t* cands, int count, const void* w,
                    const void* x, void* out, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bool autotune_ = true;
  // fp8_outer_vec; fp8_fast_accum: Hopper's FP8 MMA accumulates in reduced
  // precision unless the GEMM promotes partial sums to fp32 every few k
  // steps, and fast accumulation skips the promotion (as Transformer Engine
  // does for forward GEMMs): the accuracy the wgmma linear must match.
  TuningSwitches switches_;
  std::map<GemmKey, cublasLtMatmulAlgo_t>* algos_ = nullptr;  // the tuner's
  int tune_m_ = 0;
  std::map<std::tuple<int, int, int, bool, bool>, std::unique_ptr<Plan>> plans_;  // m, n, k, f32, fp8
};

}  // namespace gemma::cuda
