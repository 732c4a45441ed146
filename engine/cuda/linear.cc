#include "engine/cuda/linear.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_fp8.h"
#include "kernels/quant/fp8_quant.h"

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

absl::Status LinearRunner::ReserveFp8(int max_m, int max_k) {
  if (max_m <= fp8_max_m_ && max_k <= fp8_max_k_) return absl::OkStatus();
  GEMMA_STATUS_RETURN_IF_ERROR(x_fp8_.Allocate(static_cast<size_t>(max_m) * max_k));
  GEMMA_STATUS_RETURN_IF_ERROR(x_scale_.Allocate(static_cast<size_t>(max_m) * sizeof(float)));
  fp8_max_m_ = max_m;
  fp8_max_k_ = max_k;
  return absl::OkStatus();
}

int LinearRunner::VariantFor(int n, int k, int batch, bool fp8) const {
  auto it = best_.find({n, k, batch, fp8});
  return it == best_.end() ? -1 : it->second;
}

std::string LinearRunner::LaunchGemvVariant(const LinearArgs& a, int variant, cudaStream_t stream) {
  if (a.w.fp8()) {
    kernels::GemvFp8Params p;
    p.w = a.w.e4m3();
    p.w_scale = a.w.row_scale;
    p.x = a.x_fp8;
    p.x_scale = a.x_scale;
    p.out_bf16 = a.out_bf16;
    p.out_f32 = a.out_f32;
    p.n = a.n;
    p.k = a.k;
    p.batch = a.m;
    p.softcap = a.softcap;
    p.variant = variant;
    return kernels::LaunchGemvFp8(p, stream);
  }
  kernels::GemvParams p;
  p.w = a.w.bf16();
  p.x = a.x;
  p.out_bf16 = a.out_bf16;
  p.out_f32 = a.out_f32;
  p.n = a.n;
  p.k = a.k;
  p.batch = a.m;
  p.softcap = a.softcap;
  p.variant = variant;
  return kernels::LaunchGemv(p, stream);
}

absl::Status LinearRunner::QuantizeX(const __nv_bfloat16* x, int m, int k, cudaStream_t stream) {
  if (m > fp8_max_m_ || k > fp8_max_k_) {
    return absl::InternalError(absl::StrCat("fp8 linear: ", m, " x ", k, " activations exceed the reserved ",
                                            fp8_max_m_, " x ", fp8_max_k_, " (ReserveFp8)"));
  }
  kernels::QuantizeRowsFp8Params q;
  q.x = x;
  q.out = x_fp8_.get<uint8_t>();
  q.scale = x_scale_.get<float>();
  q.rows = m;
  q.cols = k;
  return KernelStatus(kernels::LaunchQuantizeRowsFp8(q, stream));
}

absl::Status LinearRunner::PrepareFp8Input(LinearArgs& a, cudaStream_t stream) {
  if (a.x_fp8 != nullptr) {
    return a.x_scale != nullptr ? absl::OkStatus() : absl::InternalError("fp8 linear: x_fp8 without x_scale");
  }
  GEMMA_STATUS_RETURN_IF_ERROR(QuantizeX(a.x, a.m, a.k, stream));
  a.x_fp8 = x_fp8_.get<uint8_t>();
  a.x_scale = x_scale_.get<float>();
  return absl::OkStatus();
}

absl::Status LinearRunner::RunFp8(LinearArgs a, cudaStream_t stream) {
  GEMMA_STATUS_RETURN_IF_ERROR(PrepareFp8Input(a, stream));
  if (a.m <= kernels::kGemvMaxBatch) {
    return KernelStatus(LaunchGemvVariant(a, VariantFor(a.n, a.k, a.m, true), stream));
  }
  // cuBLASLt applies the per-row weight and per-token activation scales when
  // it offers the outer-vector scale mode; else it multiplies the E4M3 codes
  // and a small kernel scales the result in place.
  void* out = a.out_f32 ? static_cast<void*>(a.out_f32) : static_cast<void*>(a.out_bf16);
  auto scaled = gemm_->RunFp8(a.w.data, a.w.row_scale, a.x_fp8, a.x_scale, out,
                              a.out_f32 != nullptr, a.m, a.n, a.k, stream);
  if (!scaled.ok()) return scaled.status();
  if (*scaled) return a.softcap > 0.0f ? Softcap(a, stream) : absl::OkStatus();
  kernels::ScaleFp8GemmParams sp;
  sp.out_bf16 = a.out_bf16;
  sp.out_f32 = a.out_f32;
  sp.weight_scale = a.w.row_scale;
  sp.token_scale = a.x_scale;
  sp.m = a.m;
  sp.n = a.n;
  sp.softcap = a.softcap;
  return KernelStatus(kernels::LaunchScaleFp8Gemm(sp, stream));
}

absl::Status LinearRunner::Softcap(const LinearArgs& a, cudaStream_t stream) {
  kernels::SoftcapParams sp;
  sp.x = a.out_f32;
  sp.count = static_cast<int64_t>(a.m) * a.n;
  sp.cap = a.softcap;
  return KernelStatus(kernels::LaunchSoftcap(sp, stream));
}

absl::Status LinearRunner::Run(const LinearArgs& a, cudaStream_t stream) {
  if (a.w.fp8()) return RunFp8(a, stream);
  if (a.m <= kernels::kGemvMaxBatch) {
    return KernelStatus(LaunchGemvVariant(a, VariantFor(a.n, a.k, a.m, false), stream));
  }
  void* out = a.out_f32 ? static_cast<void*>(a.out_f32) : static_cast<void*>(a.out_bf16);
  GEMMA_STATUS_RETURN_IF_ERROR(gemm_->Run(a.w.data, a.x, out, a.out_f32 != nullptr, a.m, a.n, a.k, stream));
  return a.softcap > 0.0f ? Softcap(a, stream) : absl::OkStatus();
}

absl::Status LinearRunner::Autotune(int n, int k, int batch, const DeviceMatrix& w,
                                    const __nv_bfloat16* x, float* out, cudaStream_t stream) {
  const bool fp8 = w.fp8();
  cudaEvent_t start, stop;
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  float best_ms = 1e30f;
  int best = -1;
  // bf16: CUDA-core tilings and, for batch >= 2, the tensor-core ones; fp8:
  // its tensor-core tilings. The fastest wins, so adding candidates never
  // makes a tuned shape slower.
  const int num_variants = fp8 ? kernels::NumGemvFp8Variants() : kernels::NumGemvVariants();
  LinearArgs a;
  a.w = w;
  a.x = x;
  a.out_f32 = out;
  a.m = batch;
  a.n = n;
  a.k = k;
  if (fp8) GEMMA_STATUS_RETURN_IF_ERROR(PrepareFp8Input(a, stream));
  for (int v = 0; v < num_variants; ++v) {
    if (!fp8 && !kernels::GemvVariantSupportsBatch(v, batch)) continue;
    GEMMA_KERNEL_RETURN_IF_ERROR(LaunchGemvVariant(a, v, stream));  // warm-up
    constexpr int kReps = 10;
    cudaEventRecord(start, stream);
    for (int i = 0; i < kReps; ++i) LaunchGemvVariant(a, v, stream);
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
  best_[{n, k, batch, fp8}] = best;
  return absl::OkStatus();
}

}  // namespace gemma::cuda
