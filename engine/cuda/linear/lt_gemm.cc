#include "engine/cuda/linear/lt_gemm.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/cuda/common/cuda_util.h"
#include "spdlog/spdlog.h"

namespace gemma::cuda {
namespace {

constexpr int kCandidates = 8;

absl::Status LtStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cublasGetStatusString(st)));
}

#define GEMMA_LT_RETURN_IF_ERROR(expr) GEMMA_STATUS_RETURN_IF_ERROR(LtStatus((expr), #expr))

// cuBLASLt's outer-vector scale mode wins for prefill passes but its
// kernels for skinny m are slower than the scalar mode plus our epilogue
// (H200, 2026-11-30, 31B shapes: batch-16 decode step 15.4 vs 12.5 ms,
// batch 64 16.4 vs 14.8 ms; prefill @8K 12.2K vs 10.9K tok/s with it).
constexpr int kOuterVecMinRows = 129;

bool OuterVecWanted(int m, const TuningSwitches& switches) {
  return m >= kOuterVecMinRows && switches.fp8_outer_vec;
}

// Sets A's and B's scale mode and pointers; false when this cuBLASLt rejects
// the attributes (older versions do not know them).
bool SetScaleMode(cublasLtMatmulDesc_t desc, cublasLtMatmulMatrixScale_t mode, const float* a_scale,
                  const float* b_scale) {
  const int32_t m = mode;
  return cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &m, sizeof(m)) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &m, sizeof(m)) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale)) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof(b_scale)) ==
             CUBLAS_STATUS_SUCCESS;
}

}  // namespace

// Column-major view: out^T [n, m] = (w as [k, n])^T . (x as [k, m]).
struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t* algo = nullptr;  // in the tuner's table
  bool outer_vec_scales = false;  // fp8: cuBLASLt applies the row/column scales
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

absl::StatusOr<std::unique_ptr<LtGemm>> LtGemm::Create(void* workspace, size_t workspace_bytes,
                                                       bool autotune, int tune_m, Tuner& tuner) {
  std::unique_ptr<LtGemm> g(new LtGemm());
  GEMMA_LT_RETURN_IF_ERROR(cublasLtCreate(&g->handle_));
  g->workspace_ = workspace;
  g->workspace_bytes_ = workspace_bytes;
  g->autotune_ = autotune;
  g->switches_ = tuner.switches();
  g->algos_ = &tuner.choices().gemm_algo;
  g->tune_m_ = tune_m;
  return g;
}


LtGemm::~LtGemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

absl::Status LtGemm::Tune(Plan& plan, const cublasLtMatmulHeuristicResult_t* cands, int count,
                          const void* w, const void* x, void* out, cudaStream_t stream) {
  cudaEvent_t start, stop;
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  const float alpha = 1.0f, beta = 0.0f;
  float best_ms = 1e30f;
  for (int i = 0; i < count; ++i) {
    float ms_total = 0.0f;
    bool ok = true;
    for (int rep = 0; rep < 3 && ok; ++rep) {  // rep 0 warms up
      cudaEventRecord(start, stream);
      ok = cublasLtMatmul(handle_, plan.desc, &alpha, w, plan.a, x, plan.b, &beta, out, plan.c, out,
                          plan.c, &cands[i].algo, workspace_, workspace_bytes_, stream) ==
           CUBLAS_STATUS_SUCCESS;
      cudaEventRecord(stop, stream);
      cudaEventSynchronize(stop);
      float ms = 0.0f;
      cudaEventElapsedTime(&ms, start, stop);
      if (rep > 0) ms_total += ms;
    }
    if (ok && ms_total < best_ms) {
      best_ms = ms_total;
      *plan.algo = cands[i].algo;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGetLastError();  // a rejected candidate must not poison later checks
  // The last candidate timed may not be the winner: recompute the result.
  return LtStatus(cublasLtMatmul(handle_, plan.desc, &alpha, w, plan.a, x, plan.b, &beta, out, plan.c, out,
                                 plan.c, plan.algo, workspace_, workspace_bytes_, stream),
                  "cublasLtMatmul");
}

absl::StatusOr<LtGemm::Plan*> LtGemm::GetPlan(const void* w, const void* x, void* out, bool out_f32,
                                              int m, int n, int k, cudaStream_t stream, bool fp8_inputs,
                                              const float* w_scale, const float* x_scale) {
  const auto key = std::make_tuple(m, n, k, out_f32, fp8_inputs);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  GEMMA_LT_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans = CUBLAS_OP_T;
  GEMMA_LT_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
  if (fp8_inputs && switches_.fp8_fast_accum) {
    const int8_t fast = 1;
    GEMMA_LT_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
  }
  // FP8 on Hopper needs this "TN" form (A transposed, B not), which is ours.
  const cudaDataType_t in_type = fp8_inputs ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  GEMMA_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->a, in_type, k, n, k));
  GEMMA_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->b, in_type, k, m, k));
  GEMMA_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->c, out_f32 ? CUDA_R_32F : CUDA_R_16BF, n, m, n));
  cublasLtMatmulPreference_t pref = nullptr;
  GEMMA_LT_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                       sizeof(workspace_bytes_));
  cublasLtMatmulHeuristicResult_t cands[kCandidates];
  int count = 0;
  auto heuristic = [&]() {
    count = 0;
    return cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c, pref,
                                          kCandidates, cands, &count);
  };
  cublasStatus_t hs = CUBLAS_STATUS_NOT_SUPPORTED;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(stream, &capturing);
  if (fp8_inputs && OuterVecWanted(m, switches_)) {
    plan->outer_vec_scales = SetScaleMode(plan->desc, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, w_scale, x_scale) &&
                             (hs = heuristic()) == CUBLAS_STATUS_SUCCESS && count > 0;
    // A heuristic may offer what the run then rejects: try the first
    // candidate once (its output is overwritten by the real call).
    if (plan->outer_vec_scales && capturing == cudaStreamCaptureStatusNone) {
      const float alpha = 1.0f, beta = 0.0f;
      plan->outer_vec_scales = cublasLtMatmul(handle_, plan->desc, &alpha, w, plan->a, x, plan->b, &beta, out,
                                              plan->c, out, plan->c, &cands[0].algo, workspace_, workspace_bytes_,
                                              stream) == CUBLAS_STATUS_SUCCESS;
      cudaGetLastError();
    }
    if (!plan->outer_vec_scales) {
      SetScaleMode(plan->desc, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, nullptr, nullptr);
      spdlog::info("cuda: fp8 GEMM {}x{}x{}: no outer-vector scale mode here, scaling in an epilogue", m, n, k);
    }
  }
  if (!plan->outer_vec_scales) hs = heuristic();
  cublasLtMatmulPreferenceDestroy(pref);
  GEMMA_STATUS_RETURN_IF_ERROR(LtStatus(hs, "cublasLtMatmulAlgoGetHeuristic"));
  if (count == 0) {
    return absl::InternalError(
        absl::StrCat("cuBLASLt: no algorithm for ", m, "x", n, "x", k, fp8_inputs ? " (fp8)" : ""));
  }
  cublasLtMatmulAlgo_t& algo = (*algos_)[key];
  algo = cands[0].algo;
  plan->algo = &algo;
  // Timed: the full prefill pass and the decode batch buckets (powers of two,
  // planned at start-up when their graphs are captured), the shapes that run
  // all the time; the heuristic's first choice can be far off for skinny m.
  const bool hot = m == tune_m_ || (m <= 512 && (m & (m - 1)) == 0);
  if (autotune_ && hot && count > 1 && capturing == cudaStreamCaptureStatusNone) {
    GEMMA_STATUS_RETURN_IF_ERROR(Tune(*plan, cands, count, w, x, out, stream));
    spdlog::debug("cuda: GEMM {}x{}x{} tuned over {} candidates", m, n, k, count);
  }
  Plan* raw = plan.get();
  plans_[key] = std::move(plan);
  return raw;
}

absl::Status LtGemm::Run(const void* w, const void* x, void* out, bool out_f32, int m, int n, int k,
                         cudaStream_t stream) {
  auto plan = GetPlan(w, x, out, out_f32, m, n, k, stream, false, nullptr, nullptr);
  if (!plan.ok()) return plan.status();
  const float alpha = 1.0f, beta = 0.0f;
  return LtStatus(cublasLtMatmul(handle_, (*plan)->desc, &alpha, w, (*plan)->a, x, (*plan)->b, &beta, out,
                                 (*plan)->c, out, (*plan)->c, (*plan)->algo, workspace_, workspace_bytes_,
                                 stream),
                  "cublasLtMatmul");
}

absl::StatusOr<bool> LtGemm::RunFp8(const void* w, const float* w_scale, const void* x, const float* x_scale,
                                    void* out, bool out_f32, int m, int n, int k, cudaStream_t stream) {
  auto plan = GetPlan(w, x, out, out_f32, m, n, k, stream, true, w_scale, x_scale);
  if (!plan.ok()) return plan.status();
  Plan& p = **plan;
  // Plans are shared by every layer of the shape: point at this call's scales.
  if (p.outer_vec_scales && !SetScaleMode(p.desc, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, w_scale, x_scale)) {
    return absl::InternalError("cuBLASLt: setting the fp8 scale pointers failed");
  }
  const float alpha = 1.0f, beta = 0.0f;
  GEMMA_STATUS_RETURN_IF_ERROR(LtStatus(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, out, p.c,
                                                       out, p.c, p.algo, workspace_, workspace_bytes_, stream),
                                        "cublasLtMatmul (fp8)"));
  return p.outer_vec_scales;
}

}  // namespace gemma::cuda
