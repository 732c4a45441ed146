// RMSNorm fused with Gemma 4's residual update. Per token row:
//   if branch:  h = s * (h + rms(branch, branch_weight))   (s = *layer_scalar or 1)
//   out = rms(h, out_weight)
// and, when out_fp8 is set, out also quantized to E4M3 per row for an fp8
// linear: exactly the bits LaunchQuantizeRowsFp8 would write for `out`.
// with rms(z, w) = z / sqrt(mean(z^2) + eps) * w in fp32 (no 1 + w). One launch
// covers "post-attention norm + residual + pre-FFN norm" and "post-FFN norm +
// residual + layer_scalar + next layer's input norm (or the final norm)".
//
// Launched with PDL (kernels/common/pdl.cuh): out_weight, branch_weight and
// layer_scalar are read before waiting for the previous kernel, so no kernel
// of the same step may write them. residual, out_weight and branch_weight
// must be 16-byte aligned (read as float4; checked).
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace gemma::kernels {

struct ResidualNormParams {
  const __nv_bfloat16* branch = nullptr;  // [num_tokens, hidden], or
  const float* branch_f32 = nullptr;      // the same in fp32 (saves a rounding); both null: h unchanged
  // branch_f32 only: it holds this many partial sums, [branch_parts][num_tokens,
  // hidden], added in order (a split W4A16 linear's, GemvW4Params::partial_sums).
  int branch_parts = 1;                   // 1..kMaxBranchParts
  const float* branch_weight = nullptr;   // [hidden]; required with branch
  // Optional, both or neither, bf16 branch only: the branch holds an FP8
  // GEMM's unscaled sums, whose value is branch[t, c] * branch_col_scale[c] *
  // branch_token_scale[t] (the scales that GEMM left to its consumer).
  const float* branch_col_scale = nullptr;    // [hidden]
  const float* branch_token_scale = nullptr;  // [num_tokens]
  const float* layer_scalar = nullptr;    // [1] on the device, or nullptr for 1
  float* residual = nullptr;              // [num_tokens, hidden] fp32, updated in place
  const float* out_weight = nullptr;      // [hidden]
  __nv_bfloat16* out = nullptr;           // [num_tokens, hidden]
  uint8_t* out_fp8 = nullptr;             // [num_tokens, hidden] E4M3 of out, or nullptr
  float* out_scale = nullptr;             // [num_tokens] its per-row scales; required with out_fp8
  int num_tokens = 0;
  int hidden = 0;                         // multiple of 8, <= 16384
  float eps = 1e-6f;
  // Decode form (fewer than 256 tokens) only: let the next kernel launch
  // before this one waits for its predecessor instead of after, so the next
  // GEMV's blocks take multiprocessors as the previous GEMV's leave them and
  // prefetch weights through its tail (they still wait for this kernel
  // before reading `out`). An exception to kernels/common/pdl.cuh's rule.
  bool launch_next_early = false;
  // Up to kClusterNormMaxTokens tokens only: each token's row is spread over
  // a cluster of 8 blocks, an eighth each, whose sums of squares are added
  // through distributed shared memory, so a row's loads and stores go through
  // 8 multiprocessors instead of one (decode steps of a few tokens, where the
  // GPU is otherwise idle). Same math; the sums are taken in another order.
  bool over_cluster = false;
};

inline constexpr int kMaxBranchParts = 4;
inline constexpr int kClusterNormMaxTokens = 16;

std::string LaunchResidualNorm(const ResidualNormParams& p, cudaStream_t stream);

}  // namespace gemma::kernels
