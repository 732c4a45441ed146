// y[m, n] = x[m, k] . w[n, k]^T for weights in nn.Linear layout, bf16 or FP8
// E4M3 with per-row scales. Up to kGemvMaxBatch rows run the bandwidth-bound
// GEMV kernel (decode); more rows run a cuBLASLt GEMM with fp32 accumulation
// (prefill). Fp8 decode batches up to WgmmaPath::kMaxM run the wgmma FP8
// linear instead of the GEMV / cuBLASLt where AutotuneWgmmaFp8 measured it
// faster (wgmma_path.h). For fp8 weights x is first quantized to E4M3 per token (one
// scale per row, like vLLM's dynamic FP8), into buffers sized by
// ReserveFp8(), unless the caller passes x already quantized (x_fp8,
// x_scale); the scales are applied in the GEMV's store, or by cuBLASLt
// (outer-vector scale mode) or else a small epilogue kernel after its FP8
// GEMM. Decode is
// graph-safe: no allocation or synchronization after construction; a GEMM's
// first use of a shape plans it (and for the full pass size, times it).
// Thread-safety: owned by the backend's thread.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"
#include "engine/cuda/common/cuda_util.h"
#include "engine/cuda/common/device_matrix.h"
#include "engine/cuda/linear/lt_gemm.h"
#include "engine/cuda/linear/tuner.h"
#include "engine/cuda/linear/wgmma_path.h"

namespace gemma::cuda {

struct LinearArgs {
  DeviceMatrix w;                     // [n, k]
  const __nv_bfloat16* x = nullptr;  // [m, k]
  __nv_bfloat16* out_bf16 = nullptr; // [m, n], or
  float* out_f32 = nullptr;          // [m, n]
  int m = 0, n = 0, k = 0;
  float softcap = 0.0f;              // > 0: cap * tanh(y / cap) (fp32 out only)
  // fp8 weights only, optional: x already quantized per token (what
  // LaunchQuantizeRowsFp8 writes, e.g. by the producing norm or gelu gate);
  // then x itself is not read and no quantization is launched.
  const uint8_t* x_fp8 = nullptr;    // [m, k] E4M3
  const float* x_scale = nullptr;    // [m]
  // w a fused gate|up [2 I, k]: out_bf16 is [m, I], gelu_tanh(gate) * up.
  // Only where FusesGeluGate(w, m) (else Run refuses it).
  bool gelu_gate = false;
  // Only where Int4SplitParts(w, m, n, k) > 0: out_f32 receives that many
  // partial sums, [parts][n], whose sum in order is the output (the
  // residual norm adds them, ResidualNormParams::branch_parts).
  bool partial_sums = false;
};

// The scales an fp8 Run left to the consumer of its output (Run's `left`):
// the value is out[t, c] * col[c] * token[t]. Both null when Run applied them.
struct LeftScales {
  const float* col = nullptr;    // [n] the weights' row scales
  const float* token = nullptr;  // [m] the activations' per-token scales
};

class LinearDispatcher {
 public:
  // `autotune`: time GEMM algorithms for m == tune_m (and GEMV tilings in
  // Autotune()). The choices and the switches are `tuner`'s, which must
  // outlive the dispatcher.
  static absl::StatusOr<std::unique_ptr<LinearDispatcher>> Create(Tuner* tuner, bool autotune, int tune_m);
  // `left`, optional: where a bf16-output fp8 GEMM would scale its sums in
  // an epilogue kernel of its own (cuBLASLt without the outer-vector mode,
  // e.g. decode batches of 9..128 rows), it skips that kernel and leaves the
  // scales to the caller, whose consumer kernel applies them as it reads
  // (the gelu gate, the residual norm). Set on every call: {} when applied.
  absl::Status Run(const LinearArgs& a, cudaStream_t stream, LeftScales* left = nullptr);
  // Allocates the per-token quantized activations fp8 weights need: up to
  // `max_m` rows of `max_k`. Call before any Run with fp8 weights.
  absl::Status ReserveFp8(int max_m, int max_k);
  // int4 (W4A16) weights (linear_int4.cc): the W4A16 kernel up to 256 rows
  // (one launch per 64; 16 for a matrix with a bf16 copy), else the bf16 GEMM
  // on the copy (DeviceMatrix::w4_bf16) or on the matrix dequantized into a
  // scratch of `max_elements` (reserve the largest n x k before such a Run).
  absl::Status ReserveInt4(int64_t max_elements);
  // Whether Run on int4 weights with m rows runs the matrix's fp8 copy.
  static bool Int4UsesFp8Copy(const DeviceMatrix& w, int m);
  // Whether Run(w, m rows) can take gelu_gate: an int4 matrix in the paired
  // tiling whose m rows run the W4A16 kernel (not a copy or a dequantized
  // GEMM). The gelu gate kernel then need not run.
  static bool FusesGeluGate(const DeviceMatrix& w, int m);
  // How many partial sums a Run of int4 w at m rows with partial_sums would
  // write: the split tiling AutotuneInt4 kept for (n, k) at batch 1, else 0
  // (run it whole).
  int Int4SplitParts(const DeviceMatrix& w, int m, int n, int k) const;
  // What a split tiling must beat the best whole one by, in the tuner's
  // timing: the residual norm's extra reads of the partial sums.
  static constexpr float kInt4SplitMarginMs = 0.0005f;
  // The wgmma FP8 linear's split-K scratch for matrices of up to max_n rows
  // (WgmmaPath::Reserve). Call at start-up, before AutotuneWgmmaFp8.
  absl::Status ReserveWgmmaFp8(int max_n) { return wgmma_.Reserve(max_n); }
  // Whether Run(w, m rows, n, k) with x_fp8 given would read those codes: fp8
  // weights (or int4 ones whose fp8 copy serves m rows, Int4UsesFp8Copy),
  // and a GEMM (m > kGemvMaxBatch), the wgmma linear, or a GEMV whose tuned
  // choice takes E4M3 input. A producer that can emit x_fp8 (a norm, the gelu gate)
  // asks first, so it skips the codes the a16 GEMVs would not read.
  bool TakesFp8Input(const DeviceMatrix& w, int m, int n, int k) const;

  // Times every GEMV variant that supports `batch` (CUDA-core tilings, plus the
  // tensor-core ones for batch >= 2) for (n, k, batch); remembers the fastest,
  // also in the autotune cache file (kernels/attention/autotune.h), from which
  // a later start-up on the same GPU and build takes it without timing. With
  // GEMMA_AUTOTUNE=0 the cache is off and every start-up re-times (the GEMV
  // always has a measured choice; only the attention falls back to defaults).
  // Not graph-safe: call before capture. `scratch_*` are device buffers of
  // at least n*k (w), batch*k (x) and batch*n (out) elements.
  // fp8 `w`: the fp8 GEMV tilings, E4M3 x (quantized first; ReserveFp8
  // first) and bf16 x, and the quantization itself (see Fp8VariantFor).
  absl::Status Autotune(int n, int k, int batch, const DeviceMatrix& w, const __nv_bfloat16* x,
                        float* out, cudaStream_t stream);
  // int4 `copies` of one shape (every layer's, so the timed weights stream
  // from HBM as in a step, not from L2): times every W4A16 tiling that
  // serves `batch`, launch i reading copy i % size; keeps the fastest.
  // `partial_sums` (batch 1; `out` holds kernels::kMaxBranchParts x n
  // floats): the split tilings too, kept apart (Int4SplitParts).
  // Autotune() on an int4 matrix times it alone.
  absl::Status AutotuneInt4(int n, int k, int batch, std::span<const DeviceMatrix> copies, const __nv_bfloat16* x,
                            float* out, cudaStream_t stream, bool partial_sums = false);
  // Times the wgmma FP8 linear against the tuned GEMV (batches up to
  // kGemvMaxBatch; call after Autotune) and cuBLASLt (above) for the fp8
  // matrices `mats` of shape [n, k] (every layer's copy: see
  // WgmmaPath::Autotune) at the decode buckets up to max_m; out_f32 and
  // softcap as the real calls (the LM head). Not graph-safe: call before
  // capture.
  // `codes_given`: whether decode passes this shape x_fp8 (WgmmaPath::Autotune).
  // `scales_left`: whether decode hands its output's reader the scales
  // (Run's `left`): the cuBLASLt baseline is then timed without its scaling
  // kernel, as it runs.
  absl::Status AutotuneWgmmaFp8(std::span<const DeviceMatrix> mats, int n, int k, int max_m, bool out_f32,
                                float softcap, bool codes_given, bool scales_left, cudaStream_t stream);
  // What an fp8 Run of w at m rows launches: a wgmma variant x splits,
  // "GEMV" or "cuBLASLt" (logs, tests).
  std::string Fp8GemmFor(const DeviceMatrix& w, int n, int k, int m) const { return wgmma_.Describe(w, n, k, m); }
  // For tests and A/B runs: overrides GEMMA_FP8_WGMMA (kForce: wgmma
  // wherever tuned, even where the GEMV / cuBLASLt measured faster).
  void set_wgmma_preference(WgmmaPreference p) { wgmma_.set_preference(p); }
  // After a failed AutotuneWgmmaFp8: GEMV / cuBLASLt only, scratch freed.
  void DisableWgmmaFp8() { wgmma_.Disable(); }
  int num_tuned() const {
    return static_cast<int>(tuner_.choices().gemv_bf16.size() + tuner_.choices().gemv_fp8.size());
  }
  // Autotune() calls answered from the cache, and the cache key of a shape.
  int cache_hits() const { return cache_hits_ + wgmma_.cache_hits(); }
  std::string GemvCacheKey(bool fp8, int n, int k, int batch) const;
  std::string WgmmaCacheKey(int n, int k, int bucket, bool codes_given = true) const {
    return wgmma_.CacheKey(n, k, bucket, codes_given);
  }
  // One line per tuned fp8 shape at `batch`: the measured E4M3 and a16 choices
  // and their times (empty when none), for the start-up log.
  std::string Fp8TuningSummary(int batch) const;

 private:
  explicit LinearDispatcher(Tuner& tuner)
      : tuner_(tuner), a16_(tuner.switches().fp8_a16), wgmma_(tuner) {}
  int VariantFor(int n, int k, int batch) const;
  absl::Status RunInt4(const LinearArgs& a, cudaStream_t stream, LeftScales* left);
  // The split W4A16 tiling a partial-sum Run of int4 w at m rows launches
  // (Int4SplitParts), or -1.
  int Int4SplitVariant(const DeviceMatrix& w, int m, int n, int k) const;
  // The fp8 GEMV variant for (n, k, m): a16 (when x comes in bf16) if it
  // beats E4M3 plus, unless x comes quantized, the quantization; -1 (the E4M3
  // default) when untuned.
  int Fp8VariantFor(int n, int k, int m, bool have_codes, bool have_bf16) const;
  absl::Status RunFp8(LinearArgs a, cudaStream_t stream, LeftScales* left);
  // What RunFp8 launches without the wgmma path: the tuned fp8 GEMV at
  // m <= kGemvMaxBatch, else cuBLASLt (x quantized first unless given).
  absl::Status RunFp8Baseline(LinearArgs a, cudaStream_t stream, LeftScales* left = nullptr);
  // cuBLASLt's FP8 GEMM and, unless it applied them, the scales (x_fp8 set).
  absl::Status RunFp8Gemm(const LinearArgs& a, cudaStream_t stream, LeftScales* left);
  absl::Status Softcap(const LinearArgs& a, cudaStream_t stream);  // fp32 out, in place
  absl::Status QuantizeX(const __nv_bfloat16* x, int m, int k, cudaStream_t stream);
  // Quantizes a.x into x_fp8_ unless a brings its codes; points a at them.
  absl::Status PrepareFp8Input(LinearArgs& a, cudaStream_t stream);
  std::string LaunchGemvVariant(const LinearArgs& a, int variant, cudaStream_t stream);
  bool LoadTuned(bool fp8, int n, int k, int batch);   // false: not cached (or stale)
  void StoreTuned(bool fp8, int n, int k, int batch) const;

  Tuner& tuner_;  // the GEMV choices: gemv_bf16, gemv_fp8, gemv_int4
  DeviceBuffer workspace_;
  std::unique_ptr<LtGemm> gemm_;
  DeviceBuffer int4_scratch_;  // bf16 [max_elements]: a dequantized int4 matrix for the GEMM
  int64_t int4_scratch_elements_ = 0;
  DeviceBuffer x_fp8_;    // E4M3 [max_m, max_k]
  DeviceBuffer x_scale_;  // fp32 [max_m]
  int64_t fp8_max_m_ = 0, fp8_max_k_ = 0;
  int cache_hits_ = 0;
  bool a16_ = true;  // GEMMA_FP8_A16=0 leaves the a16 GEMVs out of autotuning (A/B runs)
  WgmmaPath wgmma_;
  bool wgmma_failed_ = false;  // a wgmma launch was refused: logged once, the baseline ran
};

}  // namespace gemma::cuda
