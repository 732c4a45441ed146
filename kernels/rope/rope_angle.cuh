// The RoPE angle of frequency pair k at a position, as every kernel that
// rotates computes it (fp32, like transformers' cos / sin tables): qkv_rope
// per token, the rope table (rope_table.h) for every position at once, so
// keys rebuilt from a table equal keys rotated when they were appended.
#pragma once

namespace gemma::kernels {

__device__ __forceinline__ void RopeSinCos(int pos, int k, int head_dim, float theta, float* s, float* c) {
  const float inv_freq = powf(theta, -2.0f * k / head_dim);
  // sincosf, not __sincosf: angles reach pos (up to 2^18 radians), where
  // only the full range reduction is accurate.
  sincosf(static_cast<float>(pos) * inv_freq, s, c);
}

}  // namespace gemma::kernels
