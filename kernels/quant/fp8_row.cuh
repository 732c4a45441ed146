// Device helpers for per-row E4M3 quantization, shared by the stand-alone
// quantizer (fp8_quant.cu) and the producers that emit fp8 rows directly (the
// residual norm, the gelu gate), so every path yields the same bits: the row's
// values are the bf16-rounded outputs, scale = amax / 448 (1 for a zero row),
// code = satfinite_e4m3(value * (1 / scale)).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/quant/fp8_quant.h"

namespace gemma::kernels {

__device__ __forceinline__ float Fp8RowScale(float amax) { return amax > 0.0f ? amax / kFp8E4M3Max : 1.0f; }

// Largest |value| of 8 bf16 values.
__device__ __forceinline__ float AbsMax8(const uint4& v) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(h[j]);
    m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
  }
  return m;
}

// E4M3 codes of 8 bf16 values times `inv` (byte j = value j).
__device__ __forceinline__ uint2 QuantizeE4M3x8(const uint4& v, float inv) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  uint32_t packed[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float2 a = __bfloat1622float2(h[2 * j]), b = __bfloat1622float2(h[2 * j + 1]);
    a.x *= inv;
    a.y *= inv;
    b.x *= inv;
    b.y *= inv;
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(a, __NV_SATFINITE, __NV_E4M3);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(b, __NV_SATFINITE, __NV_E4M3);
    packed[j] = lo | (hi << 16);
  }
  return make_uint2(packed[0], packed[1]);
}

// Max over the block; every thread gets the result. `scratch` holds >= 32
// floats. REQUIRES: blockDim.x a multiple of 32.
__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : 0.0f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace gemma::kernels
