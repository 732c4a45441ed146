// 4-bit weights on the device, in the packed layout of
// engine/model/quantization_int4.h (read by kernels/gemv/gemv_w4a16.h):
//   - LaunchQuantizeQ4_0: bf16 or fp32 [n, k] -> Q4_0 codes and fp16 scales,
//     GGML's rule (d = m / -8 with m the block's value of largest magnitude,
//     u = min(15, trunc(x * (1 / d) + 8.5)), d stored as fp16), the same bits
//     as the host's QuantizeQ4_0 + PackForDevice (no fused multiply-adds);
//   - LaunchDequantizeW4: packed codes and scales -> bf16 [n, k]
//     (round to nearest of (u - 8) * scale), for the large-batch path that
//     multiplies with a bf16 GEMM.
// Launchers validate, never allocate or synchronize, return "" or a message.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace gemma::kernels {

struct QuantizeQ4_0Params {
  const __nv_bfloat16* in_bf16 = nullptr;  // [n, k], or
  const float* in_f32 = nullptr;           // [n, k] (exactly one)
  uint8_t* w = nullptr;                    // [n, W4PaddedK(k) / 2]
  __half* scales = nullptr;                // [n, W4PaddedK(k) / 32]
  int64_t n = 0;
  int k = 0;                               // multiple of 32
};
std::string LaunchQuantizeQ4_0(const QuantizeQ4_0Params& p, cudaStream_t stream);

struct DequantizeW4Params {
  const uint8_t* w = nullptr;
  const __half* scales = nullptr;
  __nv_bfloat16* out = nullptr;  // [n, k]
  int64_t n = 0;
  int k = 0;                     // multiple of 32
  int group = 32;                // 32 or 128
};
std::string LaunchDequantizeW4(const DequantizeW4Params& p, cudaStream_t stream);

}  // namespace gemma::kernels
