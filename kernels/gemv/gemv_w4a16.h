// Decode-time linear layer on 4-bit weights with bf16 activations (W4A16),
// 1..8 tokens:
//   out[b, n] = sum_g scale[n, g] * sum_{k in group g} (u[n, k] - 8) * x[b, k]
// u in 0..15, one fp16 scale per (row, group of 32 or 128 input columns):
// GGML's Q4_0 (group 32) and compressed-tensors pack-quantized W4A16.
// The weights are in the packed device layout of engine/model/quantization_int4.h
// (k padded to a multiple of 128; produced on the host by PackForDevice or on
// the device by LaunchQuantizeQ4_0 in kernels/quant/w4_quant.h).
//
// Structure: the bf16 tensor-core GEMV's (gemv_mma.cu / gemv_fp8.cu a16):
// mma.sync m16n8k16 with the batch padded to 8; lane (g, t) streams one
// 16-byte lane-chunk of weight rows g and g+8 per 128-k step (32 codes each);
// the quad's four lanes hold the four lane-chunks of one super-chunk, so each
// of a chunk's four words is one 32-group across the quad: two MMAs per word
// into zeroed partials, then the partials times that group's scale into the
// fp32 accumulators (group 128: one scale per step). Codes become bf16 exactly
// in registers ((w >> 4p) & 0x000f000f | 0x43004300 is 128 + u; minus 136).
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace gemma::kernels {

inline constexpr int kW4MaxBatch = 8;

// k rounded up to the layout's 128-column super-chunks (host and device code).
#ifdef __CUDACC__
__host__ __device__
#endif
inline int W4PaddedK(int k) { return (k + 127) / 128 * 128; }

struct GemvW4Params {
  const uint8_t* w = nullptr;         // [n, W4PaddedK(k) / 2] packed codes
  const __half* scales = nullptr;     // [n, W4PaddedK(k) / group]
  const __nv_bfloat16* x = nullptr;   // [batch, k]
  __nv_bfloat16* out_bf16 = nullptr;  // [batch, n], or
  float* out_f32 = nullptr;           // [batch, n] (exactly one of the two)
  int n = 0;
  int k = 0;                          // multiple of 32
  int group = 32;                     // 32 or 128
  int batch = 0;                      // 1..kW4MaxBatch
  float softcap = 0.0f;               // > 0: out = cap * tanh(out / cap) (fp32 out only)
  int variant = -1;                   // tiling, 0..NumGemvW4Variants()-1; -1 = default
};

int NumGemvW4Variants();
const char* GemvW4VariantName(int variant);
std::string LaunchGemvW4(const GemvW4Params& p, cudaStream_t stream);

}  // namespace gemma::kernels
