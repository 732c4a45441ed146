#include "engine/cuda/linear.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"

namespace gemma::cuda {
namespace {

constexpr size_t kCublasWorkspaceBytes = 32u << 20;

absl::Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cublasGetStatusString(st)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LinearRunner>> LinearRunner::Create(cudaStream_t stream) {
  std::unique_ptr<LinearRunner> r(new LinearRunner());
  GEMMA_STATUS_RETURN_IF_ERROR(CublasStatus(cublasCreate(&r->cublas_), "cublasCreate"));
  // A fixed workspace keeps cuBLAS from allocating inside a captured graph.
  GEMMA_STATUS_RETURN_IF_ERROR(r->workspace_.Allocate(kCublasWorkspaceBytes));
  GEMMA_STATUS_RETURN_IF_ERROR(CublasStatus(
      cublasSetWorkspace(r->cublas_, r->workspace_.get(), kCublasWorkspaceBytes), "cublasSetWorkspace"));
  GEMMA_STATUS_RETURN_IF_ERROR(CublasStatus(cublasSetStream(r->cublas_, stream), "cublasSetStream"));
  return r;
}

LinearRunner::~LinearRunner() {
  if (cublas_) cublasDestroy(cublas_);
}

int LinearRunner::VariantFor(int n, int k, int batch) const {
  auto it = best_.find({n, k, batch});
  return it == best_.end() ? -1 : it->second;
}

absl::Status LinearRunner::Run(const LinearArgs& a, cudaStream_t stream) {
  if (a.m <= kernels::kGemvMaxBatch) {
    kernels::GemvParams p;
    p.w = a.w;
    p.x = a.x;
    p.out_bf16 = a.out_bf16;
    p.out_f32 = a.out_f32;
    p.n = a.n;
    p.k = a.k;
    p.batch = a.m;
    p.softcap = a.softcap;
    p.variant = VariantFor(a.n, a.k, a.m);
    return KernelStatus(kernels::LaunchGemv(p, stream));
  }
  GEMMA_STATUS_RETURN_IF_ERROR(CublasStatus(cublasSetStream(cublas_, stream), "cublasSetStream"));
  // Column-major view: out^T [n, m] = w^T(op T of the [k, n] buffer) . x^T [k, m].
  const float alpha = 1.0f, beta = 0.0f;
  void* out = a.out_f32 ? static_cast<void*>(a.out_f32) : static_cast<void*>(a.out_bf16);
  const cudaDataType_t out_type = a.out_f32 ? CUDA_R_32F : CUDA_R_16BF;
  GEMMA_STATUS_RETURN_IF_ERROR(CublasStatus(
      cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, a.n, a.m, a.k, &alpha, a.w, CUDA_R_16BF, a.k,
                   a.x, CUDA_R_16BF, a.k, &beta, out, out_type, a.n, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx"));
  if (a.softcap > 0.0f) {
    kernels::SoftcapParams sp;
    sp.x = a.out_f32;
    sp.count = static_cast<int64_t>(a.m) * a.n;
    sp.cap = a.softcap;
    GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchSoftcap(sp, stream));
  }
  return absl::OkStatus();
}

absl::Status LinearRunner::Autotune(int n, int k, int batch, const __nv_bfloat16* w,
                                    const __nv_bfloat16* x, float* out, cudaStream_t stream) {
  cudaEvent_t start, stop;
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  float best_ms = 1e30f;
  int best = -1;
  for (int v = 0; v < kernels::NumGemvVariants(); ++v) {
    kernels::GemvParams p;
    p.w = w;
    p.x = x;
    p.out_f32 = out;
    p.n = n;
    p.k = k;
    p.batch = batch;
    p.variant = v;
    GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchGemv(p, stream));  // warm-up
    constexpr int kReps = 10;
    cudaEventRecord(start, stream);
    for (int i = 0; i < kReps; ++i) kernels::LaunchGemv(p, stream);
    cudaEventRecord(stop, stream);
    GEMMA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    if (ms < best_ms) {
      best_ms = ms;
      best = v;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  best_[{n, k, batch}] = best;
  return absl::OkStatus();
}

}  // namespace gemma::cuda
