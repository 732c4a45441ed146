// Split-K decode: the merge of the splits' partials inside the attention
// launch itself, so a decode layer costs one kernel instead of two (batch-1
// decode is launch-latency bound). Included by tile_kernel.cuh; decode only.
//
// Every split block of a (sequence, KV head) writes its fp32 partials, then
// counts itself in on that pair's counter; the last block to arrive merges
// all splits for every head of the KV group and resets the counter to zero,
// so the next launch (or graph replay) starts clean. The merge reads the
// splits in order 0..S-1 whichever block arrives last: the output does not
// depend on scheduling.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/kernel_params.h"

namespace gemma::kernels::attention {

// Partials of one (sequence, head): num_splits rows of D + 4 floats (acc[D]
// unnormalized, running max in log2 units, row sum, 2 pad for 16-byte rows).
template <int D>
__device__ __forceinline__ float* PartialRow(const KernelParams& p, int seq, int head) {
  return p.partial + (static_cast<int64_t>(seq) * p.num_heads + head) * p.num_splits * (D + 4);
}

// Called by every thread of a split block after it stored its partials.
// Returns true in the last block of the pair (uniform over the block), whose
// threads then see every split's partials.
__device__ __forceinline__ bool ArriveLastSplit(int* counter, int num_splits) {
  __threadfence();  // this thread's partials are visible GPU-wide before the count
  __syncthreads();
  bool last = false;
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1) == num_splits - 1;
    // Every split has counted: nothing else touches the counter in this launch.
    if (last) *counter = 0;
  }
  if (!__syncthreads_or(last)) return false;
  __threadfence();  // acquire side: order the partial reads after the count
  return true;
}

// The last block's merge, for heads [head0, head0 + group) of token `token`:
// per head, the maximum over splits, weights 2^(m_s - max), the weighted sum
// of row sums, then out = sum_s w_s acc_s / sum. `smem` holds group *
// num_splits + group floats. Partials are read through L2 (__ldcg): other
// multiprocessors wrote them, and L1 is not coherent.
template <int D, int THREADS>
__device__ __forceinline__ void CombineSplits(const KernelParams& p, int seq, int token,
                                              int head0, int group, float* smem) {
  constexpr int kStride = D + 4;
  constexpr int kPerLane = kMaxDecodeSplits / 32;
  constexpr int kWarps = THREADS / 32;
  const int num_splits = p.num_splits;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* weight = smem;                        // [group][num_splits]
  float* inv_sum = smem + group * num_splits;  // [group]
  const float* base = PartialRow<D>(p, seq, head0);

  // One warp per head: each lane holds splits lane, lane + 32, ...; the sum
  // is reassociated over lanes (fixed order: deterministic).
  for (int h = warp; h < group; h += kWarps) {
    const float* rows = base + static_cast<int64_t>(h) * num_splits * kStride;
    float m[kPerLane], l[kPerLane];
    float max_all = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int s = lane + 32 * j;
      const float2 ml = s < num_splits ? __ldcg(reinterpret_cast<const float2*>(rows + s * kStride + D))
                                       : make_float2(-INFINITY, 0.f);
      m[j] = ml.x, l[j] = ml.y;
      max_all = fmaxf(max_all, m[j]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) max_all = fmaxf(max_all, __shfl_xor_sync(0xffffffffu, max_all, o));
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int s = lane + 32 * j;
      const float w = m[j] == -INFINITY ? 0.f : exp2f(m[j] - max_all);
      if (s < num_splits) weight[h * num_splits + s] = w;
      sum += w * l[j];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) inv_sum[h] = sum > 0.f ? __frcp_rn(sum) : 0.f;
  }
  __syncthreads();

  // Output: 4-column chunks of the group's heads, up to kBatch per thread
  // (thread-strided, so loads stay coalesced), all summed in one loop over
  // the splits in order: kBatch x 4 loads in flight per thread hide the L2
  // latency that one block merging S x group x D floats is bound by.
  constexpr int kChunks = D / 4, kBatch = 4;
  const int total = group * kChunks;
  for (int c0 = threadIdx.x; c0 < total; c0 += kBatch * THREADS) {
    const float* src[kBatch];
    const float* w[kBatch];
    bool on[kBatch];
    float4 acc[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int c = c0 + j * THREADS;
      on[j] = c < total;
      const int h = on[j] ? c / kChunks : 0;
      src[j] = base + static_cast<int64_t>(h) * num_splits * kStride + (c % kChunks) * 4;
      w[j] = weight + h * num_splits;
      acc[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll 4
    for (int s = 0; s < num_splits; ++s) {
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (!on[j]) continue;
        const float4 x = __ldcg(reinterpret_cast<const float4*>(src[j] + s * kStride));
        const float ws = w[j][s];
        acc[j].x += ws * x.x, acc[j].y += ws * x.y, acc[j].z += ws * x.z, acc[j].w += ws * x.w;
      }
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (!on[j]) continue;
      const int c = c0 + j * THREADS, h = c / kChunks, d = (c % kChunks) * 4;
      const float inv = inv_sum[h];
      __nv_bfloat162 pair[2] = {__floats2bfloat162_rn(acc[j].x * inv, acc[j].y * inv),
                                __floats2bfloat162_rn(acc[j].z * inv, acc[j].w * inv)};
      __nv_bfloat16* dst = p.out + (static_cast<int64_t>(token) * p.num_heads + head0 + h) * D + d;
      *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(pair);
    }
  }
}

}  // namespace gemma::kernels::attention
