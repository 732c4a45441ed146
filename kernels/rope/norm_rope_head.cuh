// Internal: one head vector's RMS norm and rotate-half RoPE by one warp, the
// arithmetic QKV-RoPE (qkv_rope.cu) and the fused decode attention
// (kernels/attention/decode_fused.cu) share, so both write the same bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/bf16_vec.cuh"

namespace gemma::kernels {

// The angles of position `pos` for pairs [0, rope_pairs), by `threads`
// threads from `tid` on: pair k turns by pos * theta^(-2k / head_dim).
// sincosf of large angles takes the slow range-reduction path, so a block
// computes them once for all its heads.
__device__ __forceinline__ void RopeAngles(int pos, int rope_pairs, float rope_theta, int head_dim, int tid,
                                           int threads, float* cos_t, float* sin_t) {
  for (int k = tid; k < rope_pairs; k += threads) {
    const float inv_freq = powf(rope_theta, -2.0f * k / head_dim);
    sincosf(static_cast<float>(pos) * inv_freq, &sin_t[k], &cos_t[k]);
  }
}

// The calling warp normalizes head vector `src` of d values (times `weight`,
// or unweighted when null) and, with `rotate`, turns dims k and k + d/2 by
// the angles of pair k < rope_pairs; other dims pass unchanged. buf: d floats
// of the warp's own shared memory (each lane reads its rotation partner
// there). store(i, value) receives every output element once, in fp32.
// Every rounding step is spelled out (no contraction left to the compiler),
// so the two kernels' inlined copies give the same bits.
template <class Store>
__device__ __forceinline__ void NormRopeHead(const __nv_bfloat16* src, int d, float eps, const float* weight,
                                             bool rotate, int rope_pairs, const float* cos_t, const float* sin_t,
                                             float* buf, Store store) {
  const int lane = threadIdx.x & 31;
  float ss = 0.0f;
  for (int i = lane; i < d; i += 32) {
    const float x = __bfloat162float(src[i]);
    buf[i] = x;
    ss = __fmaf_rn(x, x, ss);
  }
  const float r = rsqrtf(__fadd_rn(__fdiv_rn(WarpSum(ss), static_cast<float>(d)), eps));
  for (int i = lane; i < d; i += 32) buf[i] = __fmul_rn(__fmul_rn(buf[i], r), weight ? weight[i] : 1.0f);
  __syncwarp();
  const int half = d / 2;
  for (int i = lane; i < d; i += 32) {
    float out = buf[i];
    const int k = i < half ? i : i - half;
    if (rotate && k < rope_pairs) {
      const float c = cos_t[k], s = sin_t[k];
      out = i < half ? __fmaf_rn(buf[i], c, -__fmul_rn(buf[i + half], s))
                     : __fmaf_rn(buf[i], c, __fmul_rn(buf[i - half], s));
    }
    store(i, out);
  }
  __syncwarp();  // buf is reused by this warp's next head
}

}  // namespace gemma::kernels
