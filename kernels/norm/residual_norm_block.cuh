// One token's residual norm (kernels/norm/residual_norm.h's math, in the
// same order per element) computed by the calling block, for kernels that
// end with it (the W4A16 linear's last block, GemvW4Params::then_norm).
// Any block size that is a multiple of 32. Three passes over the row: the
// branch is read through L2 (other blocks of the caller's grid wrote it),
// the new residual is stored in place in the second pass and read back by
// the same threads in the third. Needs a bf16 branch, no branch scales, no
// fp8 output (the caller checks). Each thread loads kNormVecsInFlight
// vectors of a pass before using them.
#pragma once

#include <cuda_bf16.h>

#include "kernels/common/bf16_vec.cuh"
#include "kernels/norm/residual_norm.h"

namespace gemma::kernels {

// Vectors of 8 a thread loads before it uses them (each pass is a few
// L2 round trips, not one per vector; more would raise the register count of
// the kernels that end with this).
constexpr int kNormVecsInFlight = 2;

__device__ inline void ResidualNormTokenByBlock(const ResidualNormParams& p, int token, float* scratch) {
  constexpr int kV = kNormVecsInFlight;
  const int vecs = p.hidden / 8, stride = static_cast<int>(blockDim.x);
  const size_t base = static_cast<size_t>(token) * p.hidden;
  float* h = p.residual + base;
  const uint4* branch = reinterpret_cast<const uint4*>(p.branch + base);
  const float s = p.layer_scalar ? __ldg(p.layer_scalar) : 1.0f;
  float ss = 0.0f;
  for (int v0 = threadIdx.x; v0 < vecs; v0 += kV * stride) {
    uint4 raw[kV];
#pragma unroll
    for (int i = 0; i < kV; ++i) raw[i] = v0 + i * stride < vecs ? __ldcg(branch + v0 + i * stride) : uint4{};
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      float b[8];
      Unpack8(raw[i], b);
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += b[j] * b[j];
    }
  }
  const float rb = rsqrtf(BlockSum(ss, scratch) / p.hidden + p.eps);
  ss = 0.0f;
  for (int v0 = threadIdx.x; v0 < vecs; v0 += kV * stride) {
    uint4 raw[kV];
    float x[kV][8], w[kV][8];
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      const int v = v0 + i * stride;
      if (v >= vecs) continue;
      raw[i] = __ldcg(branch + v);
      Load8Cg(h + 8 * v, x[i]);
      Load8(p.branch_weight + 8 * v, w[i]);
    }
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      const int v = v0 + i * stride;
      if (v >= vecs) continue;
      float b[8];
      Unpack8(raw[i], b);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        x[i][j] = s * (x[i][j] + b[j] * rb * w[i][j]);
        ss += x[i][j] * x[i][j];
      }
      Store8(h + 8 * v, x[i]);
    }
  }
  const float r = rsqrtf(BlockSum(ss, scratch) / p.hidden + p.eps);
  uint4* out = reinterpret_cast<uint4*>(p.out + base);
  for (int v0 = threadIdx.x; v0 < vecs; v0 += kV * stride) {
    float x[kV][8], w[kV][8];
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      const int v = v0 + i * stride;
      if (v >= vecs) continue;
      Load8(h + 8 * v, x[i]);  // this thread's own stores of the pass above
      Load8(p.out_weight + 8 * v, w[i]);
    }
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      const int v = v0 + i * stride;
      if (v >= vecs) continue;
      float f[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) f[j] = x[i][j] * r * w[i][j];
      out[v] = Pack8(f);
    }
  }
}

}  // namespace gemma::kernels
