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

// 8 fp32 values at a 16-byte-aligned address.
__device__ __forceinline__ void Load8(const float* src, float out[8]) {
  const float4 lo = reinterpret_cast<const float4*>(src)[0], hi = reinterpret_cast<const float4*>(src)[1];
  out[0] = lo.x, out[1] = lo.y, out[2] = lo.z, out[3] = lo.w, out[4] = hi.x, out[5] = hi.y, out[6] = hi.z, out[7] = hi.w;
}

__device__ __forceinline__ void Store8(float* dst, const float in[8]) {
  reinterpret_cast<float4*>(dst)[0] = make_float4(in[0], in[1], in[2], in[3]);
  reinterpret_cast<float4*>(dst)[1] = make_float4(in[4], in[5], in[6], in[7]);
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
