// Decode-time linear layer on FP8 E4M3 weights, 1..8 tokens:
//   out[b, n] = w_scale[n] * x_scale[b] * sum_k w[n, k] x[b, k]
// with w and x both E4M3 (x quantized per token by LaunchQuantizeRowsFp8),
// fp32 accumulation in mma.sync m16n8k32 (sm_89+), batch padded to 8.
// The "a16" variants take x in bf16 instead (no quantization, no x_scale):
//   out[b, n] = w_scale[n] * sum_k w[n, k] x[b, k]
// converting the codes to bf16 in registers (exact) for mma m16n8k16; they
// spend more instructions per byte but save the activation quantization.
//
// The structure is the bf16 tensor-core GEMV's (gemv_mma.cu): each lane
// streams 16-byte chunks of two weight rows, a warp step covers 16 rows x 4
// chunks, K may be split across warps of a block. A chunk holds 16 k here
// instead of 8, so the same loads move twice the k per byte of weights.
// "p-" tilings are persistent: one wave of blocks, each with the same number
// of row tiles (the occupancy is queried once per process).
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/gemv/gemv.h"

namespace gemma::kernels {

struct GemvFp8Params {
  const uint8_t* w = nullptr;        // [n, k] E4M3
  const float* w_scale = nullptr;    // [n]
  const uint8_t* x = nullptr;        // [batch, k] E4M3 (E4M3 variants)
  const float* x_scale = nullptr;    // [batch]
  const __nv_bfloat16* x_bf16 = nullptr;  // [batch, k] (a16 variants)
  __nv_bfloat16* out_bf16 = nullptr; // [batch, n], or
  float* out_f32 = nullptr;          // [batch, n] (exactly one of the two)
  int n = 0;
  int k = 0;                         // multiple of 16
  int batch = 0;                     // 1..kGemvMaxBatch
  float softcap = 0.0f;              // > 0: out = cap * tanh(out / cap) (fp32 out only)
  int variant = -1;                  // tiling, 0..NumGemvFp8Variants()-1; -1 = default (E4M3 x)
};

int NumGemvFp8Variants();
// True for the variants that read x_bf16 (and no x / x_scale).
bool GemvFp8VariantTakesBf16(int variant);
const char* GemvFp8VariantName(int variant);
std::string LaunchGemvFp8(const GemvFp8Params& p, cudaStream_t stream);

}  // namespace gemma::kernels
