// Small device helpers shared by the element-wise kernels: 16-byte bf16
// vectors (8 elements) converted to and from fp32, and warp/block sums.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace gemma::kernels {

struct Bf16x8 {
  uint4 raw;
};

__device__ __forceinline__ void Unpack8(const uint4& v, float out[8]) {
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __bfloat1622float2(p[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ uint4 Pack8(const float in[8]) {
  uint4 v;
  __nv_bfloat162* p = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) p[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  return v;
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds >= 32
// floats. REQUIRES: blockDim.x a multiple of 32.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int num_warps = blockDim.x >> 5;
  float t = lane < num_warps ? scratch[lane] : 0.0f;
  return WarpSum(t);
}

}  // namespace gemma::kernels
