#include "engine/cuda/linear.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"

namespace gemma::cuda {
namespace {

constexpr size_t kGemmWorkspaceBytes = 32u << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<LinearRunner>> LinearRunner::Create(bool autotune, int tune_m) {
  std::unique_ptr<LinearRunner> r(new LinearRunner());
  GEMMA_STATUS_RETURN_IF_ERROR(r->workspace_.Allocate(kGemmWorkspaceBytes));
  auto gemm = LtGemm::Create(r->workspace_.get(), kGemmWorkspaceBytes, autotune, tune_m);
  if (!gemm.ok()) return gemm.status();
  r->gemm_ = std::move(*gemm);
  return r;
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
  void* out = a.out_f32 ? static_cast<void*>(a.out_f32) : static_cast<void*>(a.out_bf16);
  GEMMA_STATUS_RETURN_IF_ERROR(gemm_->Run(a.w, a.x, out, a.out_f32 != nullptr, a.m, a.n, a.k, stream));
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
  // CUDA-core tilings and, for batch >= 2, the tensor-core ones: the fastest
  // wins, so adding candidates never makes a tuned shape slower.
  for (int v = 0; v < kernels::NumGemvVariants(); ++v) {
    if (!kernels::GemvVariantSupportsBatch(v, batch)) continue;
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
