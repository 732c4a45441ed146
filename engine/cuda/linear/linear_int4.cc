// LinearDispatcher's int4 (W4A16) path: the tuned W4A16 kernel for up to
// kMaxW4Rows rows (one launch per 64), or, for a matrix with a load-time
// copy, up to kMaxW4RowsWithCopy rows (bf16 copy, DeviceMatrix::w4_bf16) or
// kMaxW4RowsWithFp8Copy (fp8 copy, w4_fp8); above that the bf16 path
// (cuBLASLt) or the fp8 path on the copy, or the bf16 path on the matrix
// dequantized per call into a scratch buffer (prefill passes, where the
// GEMM's arithmetic outweighs the dequantization).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/cuda/common/launch_timer.h"
#include "engine/cuda/linear/linear.h"
#include "kernels/gemv/gemv_w4a16.h"
#include "kernels/norm/residual_norm.h"
#include "kernels/quant/w4_quant.h"
#include "spdlog/spdlog.h"

namespace gemma::cuda {
namespace {

// Up to this many rows, launches of 64 rows each on the 4-bit weights beat
// dequantizing the matrix for one bf16 GEMM.
constexpr int kMaxW4Rows = 4 * kernels::kW4MaxBatch;
// With a bf16 copy, cuBLASLt on it beats the W4A16 kernel above 16 rows
// (H200, 31B shapes: at 32 and 64 rows the kernel streams 0.3-0.7 TB/s of
// 4-bit weights, under the bf16 GEMM's time on 3.6x the bytes).
constexpr int kMaxW4RowsWithCopy = 16;
// With an fp8 copy, the wgmma FP8 linear's 16-row tiles beat the W4A16
// kernel's two-n8-tile tilings above 8 rows (H200, 31B shapes, 16 rows:
// W4A16 27.9-82.2 us at 20-36 % of the read ceiling against the fp8 copy's
// 2.5-4.3 TB/s, e.g. gate/up 82 vs ~58 us).
constexpr int kMaxW4RowsWithFp8Copy = 8;

std::string LaunchW4(const LinearArgs& a, int row0, int rows, int variant, cudaStream_t stream) {
  kernels::GemvW4Params p;
  p.w = static_cast<const uint8_t*>(a.w.data);
  p.scales = a.w.w4_scales;
  p.x = a.x + static_cast<size_t>(row0) * a.k;
  if (a.out_f32) {
    p.out_f32 = a.out_f32 + static_cast<size_t>(row0) * a.n;
  } else {
    p.out_bf16 = a.out_bf16 + static_cast<size_t>(row0) * a.n;
  }
  p.n = a.n;
  p.k = a.k;
  p.batch = rows;
  p.softcap = a.softcap;
  p.variant = variant;
  p.paired = a.w.w4_paired;
  p.gelu_gate = a.gelu_gate;
  p.partial_sums = a.partial_sums;
  if (a.gelu_gate) p.out_bf16 = a.out_bf16 + static_cast<size_t>(row0) * (a.n / 2);
  return kernels::LaunchGemvW4(p, stream);
}

}  // namespace

absl::Status LinearDispatcher::ReserveInt4(int64_t max_elements) {
  if (max_elements <= int4_scratch_elements_) return absl::OkStatus();
  GEMMA_STATUS_RETURN_IF_ERROR(int4_scratch_.Allocate(static_cast<size_t>(max_elements) * 2));
  int4_scratch_elements_ = max_elements;
  return absl::OkStatus();
}

bool LinearDispatcher::Int4UsesFp8Copy(const DeviceMatrix& w, int m) {
  return w.w4_bf16 == nullptr && w.w4_fp8 != nullptr && m > kMaxW4RowsWithFp8Copy;
}

int LinearDispatcher::Int4SplitVariant(const DeviceMatrix& w, int m, int n, int k) const {
  if (!w.int4() || m != 1 || Int4UsesFp8Copy(w, m)) return -1;
  const auto& split = tuner_.choices().gemv_int4_split;
  const auto it = split.find({n, k, 1});
  return it == split.end() ? -1 : it->second;
}

int LinearDispatcher::Int4SplitParts(const DeviceMatrix& w, int m, int n, int k) const {
  const int variant = Int4SplitVariant(w, m, n, k);
  return variant < 0 ? 0 : kernels::GemvW4VariantSplits(variant);
}

bool LinearDispatcher::FusesGeluGate(const DeviceMatrix& w, int m) {
  return w.int4() && w.w4_paired && !(w.w4_bf16 != nullptr && m > kMaxW4RowsWithCopy) && !Int4UsesFp8Copy(w, m) &&
         m <= kMaxW4Rows;
}

absl::Status LinearDispatcher::RunInt4(const LinearArgs& a, cudaStream_t stream, LeftScales* left) {
  if (a.x == nullptr) return absl::InvalidArgumentError("int4 linear: needs bf16 input");
  if (a.gelu_gate && !FusesGeluGate(a.w, a.m)) {
    return absl::InvalidArgumentError(absl::StrCat("int4 linear: gelu_gate at ", a.m, " rows needs a paired tiling ",
                                                   "that the W4A16 kernel serves (paired: ", a.w.w4_paired, ")"));
  }
  if (a.gelu_gate && (a.out_bf16 == nullptr || a.n % 2 != 0)) {
    return absl::InvalidArgumentError("int4 linear: gelu_gate needs bf16 output and an even n");
  }
  if (a.partial_sums) {
    const int variant = Int4SplitVariant(a.w, a.m, a.n, a.k);
    if (variant < 0 || a.out_f32 == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("int4 linear: partial sums of ", a.n, " x ", a.k, " at ", a.m,
                                                     " rows: no split tiling tuned, or no fp32 output"));
    }
    GEMMA_KERNEL_RETURN_IF_ERROR(LaunchW4(a, 0, 1, variant, stream));
    return absl::OkStatus();
  }
  if (a.w.w4_bf16 != nullptr && a.m > kMaxW4RowsWithCopy) {
    LinearArgs b = a;
    b.w = DeviceMatrix(a.w.w4_bf16);
    return Run(b, stream);
  }
  if (Int4UsesFp8Copy(a.w, a.m)) {
    LinearArgs b = a;  // keeps x_fp8: the norm or gelu gate emitted codes for it (TakesFp8Input)
    b.w = a.w.Fp8Copy();
    return Run(b, stream, left);
  }
  if (a.m <= kMaxW4Rows) {
    for (int row0 = 0; row0 < a.m; row0 += kernels::kW4MaxBatch) {
      const int rows = std::min(kernels::kW4MaxBatch, a.m - row0);
      const auto& best = tuner_.choices().gemv_int4;
      const auto it = best.find({a.n, a.k, rows});
      GEMMA_KERNEL_RETURN_IF_ERROR(LaunchW4(a, row0, rows, it == best.end() ? -1 : it->second, stream));
    }
    return absl::OkStatus();
  }
  if (static_cast<int64_t>(a.n) * a.k > int4_scratch_elements_) {
    return absl::FailedPreconditionError(absl::StrCat("int4 linear: ", a.n, " x ", a.k, " needs ReserveInt4 (have ",
                                                      int4_scratch_elements_, " elements)"));
  }
  kernels::DequantizeW4Params dp;
  dp.w = static_cast<const uint8_t*>(a.w.data);
  dp.scales = a.w.w4_scales;
  dp.out = int4_scratch_.get<__nv_bfloat16>();
  dp.n = a.n;
  dp.k = a.k;
  dp.paired = a.w.w4_paired;
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchDequantizeW4(dp, stream));
  LinearArgs b = a;
  b.w = DeviceMatrix(int4_scratch_.get<__nv_bfloat16>());
  return Run(b, stream);
}

absl::Status LinearDispatcher::AutotuneInt4(int n, int k, int batch, std::span<const DeviceMatrix> copies,
                                            const __nv_bfloat16* x, float* out, cudaStream_t stream,
                                            bool partial_sums) {
  if (copies.empty()) return absl::InvalidArgumentError("int4 tuning: no matrix");
  auto timer = LaunchTimer::Create();
  if (!timer.ok()) return timer.status();
  LinearArgs a;
  a.x = x;
  a.out_f32 = out;
  a.m = batch;
  a.n = n;
  a.k = k;
  float best_ms = 1e30f;
  int best = -1;
  float best_split_ms = 1e30f;
  int best_split = -1;
  for (int v = 0; v < kernels::NumGemvW4Variants(); ++v) {
    const bool split = kernels::GemvW4VariantSplits(v) > 1;
    if (!kernels::GemvW4VariantFits(v, batch, partial_sums)) continue;
    if (split && kernels::GemvW4VariantSplits(v) > kernels::kMaxBranchParts) continue;
    a.partial_sums = split;
    auto ms = (*timer)->MeanMs(
        [&](int i) {
          a.w = copies[static_cast<size_t>(i) % copies.size()];
          return LaunchW4(a, 0, batch, v, stream);
        },
        std::max<int>(10, std::min<int>(static_cast<int>(copies.size()), 30)), stream);
    if (!ms.ok()) return ms.status();
    float& best_ms_of_kind = split ? best_split_ms : best_ms;
    if (*ms < best_ms_of_kind) {
      best_ms_of_kind = *ms;
      (split ? best_split : best) = v;
    }
  }
  tuner_.choices().gemv_int4[{n, k, batch}] = best;
  const bool force = tuner_.switches().int4_split_k == TuningSwitches::Int4SplitK::kForce;
  if (best_split >= 0) {
    spdlog::info("cuda: int4 {}x{} batch 1: split tiling {} {:.2f} us, whole {} {:.2f} us", n, k,
                 kernels::GemvW4VariantName(best_split), 1e3f * best_split_ms, kernels::GemvW4VariantName(best),
                 1e3f * best_ms);
  }
  if (best_split >= 0 && (force || best_split_ms + kInt4SplitMarginMs < best_ms)) {
    tuner_.choices().gemv_int4_split[{n, k, batch}] = best_split;
  } else {
    tuner_.choices().gemv_int4_split.erase({n, k, batch});
  }
  return absl::OkStatus();
}

}  // namespace gemma::cuda
