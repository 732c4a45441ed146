// Internal: a decode kernel whose MMA rows are keys, not query heads (bf16
// or E4M3 cache). The tile kernel's decode (rows = the heads of a KV group, at
// most 8 of an m16 tile) splits head_dim over its warps, so every key tile
// costs a reduction of partial S through shared memory and a softmax in
// every warp. Here S^T = K Q^T puts 16 keys in the rows and the group's
// heads (up to 8) in the n8 columns, so each warp owns whole keys: it runs
// the full head_dim for its 16 keys of a tile and its own online softmax,
// and the warps meet once, at the end, to merge their (max, sum, output).
//   QK: A = K (16 keys x 16 dims by ldmatrix; E4M3 bytes: a lane gets dims
//       4t..4t+3, which serve as k indices 2t, 2t+1, 2t+8, 2t+9), B = Q^T
//       (in shared memory, f16 over E4M3, read in the same dim order).
//   PV: O^T (16 dims x 8 heads) += V^T P^T: A = V^T by ldmatrix.trans of the
//       V rows (bf16: MMA row g is dim g of the 16, row g + 8 dim 8 + g;
//       E4M3: a lane's register holds dims 2g, 2g+1 of keys 2t, 2t+1, and a
//       byte permute makes (dim 2g: keys 2t, 2t+1) and (dim 2g+1: ...), so
//       row g is dim 2g and row g + 8 dim 2g + 1); B = P^T, the S^T
//       accumulator packed to 16 bits and transposed in registers
//       (movmatrix).
// SPLIT = 2: the two warps of a pair share 16 keys and split head_dim, adding
// their partial S^T through shared memory (4 floats a lane), so a warp holds
// half the output accumulator (64 registers at D = 512 instead of 128).
// KFV (bf16 cache): keys from values, as the tile kernel's build
// (KernelParams::kv_weight): a K stage holds K's rotated dims only (the
// loader's compact stages), the A operand of an unrotated 16-dim chunk is
// the V row, and Q's unrotated dims are staged as kv_weight * Q in two bf16
// terms (rounded, and what the rounding left out), a second MMA for the
// steps that have such dims.
// Same KernelParams, grid (KV heads, splits, sequences), key ranges
// (SetUpBlock), loader (KvLoader over RawOffset stages) and outputs
// (normalized rows, or split partials for CombineSplitsKernel) as the tile
// kernel's decode. Included by decode_variants.cu only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/kernel_params.h"
#include "kernels/attention/tile_ctx.cuh"
#include "kernels/attention/tile_layout.cuh"
#include "kernels/attention/tile_stages.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/smem_copy.cuh"

namespace gemma::kernels::attention {

// Rows of the n8 tile: the heads of a KV group the kernel serves at most.
inline constexpr int kKeyRowsMaxGroup = 8;


// Named barrier 1 + pair among that warp pair's 64 threads. Literal ids, so
// the kernel holds only the barriers it uses (a register id reserves all 16).
__device__ __forceinline__ void PairBarrier(int pair) {
  switch (pair) {
    case 0: asm volatile("bar.sync 1, 64;" ::: "memory"); break;
    case 1: asm volatile("bar.sync 2, 64;" ::: "memory"); break;
    case 2: asm volatile("bar.sync 3, 64;" ::: "memory"); break;
    default: asm volatile("bar.sync 4, 64;" ::: "memory"); break;
  }
}

template <int D, int WARPS, int STAGES, bool F8, int SPLIT = 1, bool KFV = false>
struct KeyRowsShape {
  static_assert(SPLIT == 1 || SPLIT == 2, "head_dim splits in one or two");
  static_assert(!KFV || !F8, "keys from values: bf16 cache");
  static_assert(WARPS % SPLIT == 0, "whole warp groups");
  static_assert(SPLIT == 1 || WARPS / SPLIT <= 4, "PairBarrier has four ids");
  static constexpr int kGroups = WARPS / SPLIT;   // warp groups, 16 keys each
  static constexpr int kBN = 16 * kGroups;        // keys per tile
  static constexpr int kSteps = D / 16 / SPLIT;   // a warp's 16-dim steps: QK k steps, PV m16 tiles
  // The loader's view: TileConfig of a WD = WARPS decode tile with the same
  // stages (only its K / V layout and thread count are used).
  using Loader = TileConfig<D, 1, WARPS, kBN, STAGES, 1, 0, F8, false, KFV>;
  static constexpr int kQTileBytes = kKeyRowsMaxGroup * D * 2;
  static constexpr int kQBytes = kQTileBytes * (KFV ? 2 : 1);  // KFV: then the second terms
  static constexpr int kStageBytes = kBN * D * (F8 ? 1 : 2);   // a V stage, and a K stage unless KFV
  static constexpr int kStagesBytes = STAGES * (Loader::S::kKStageBytes + kStageBytes);
  static constexpr int kSmemBytes = kQBytes + kStagesBytes;
  // The merge at the end reuses the stages: per warp group 8 heads x D
  // outputs, then 8 maxima and 8 sums.
  static constexpr int kMergeBytes = kGroups * (kKeyRowsMaxGroup * D + 2 * kKeyRowsMaxGroup) * 4;
  static_assert(kMergeBytes <= kStagesBytes, "the merge space must fit in the stages");
  static_assert(kSteps % 2 == 0, "two 16-dim steps per E4M3 ldmatrix");
};

// Element offset of (head, dim) in the Q tile: 16-byte chunks (8 elements)
// XOR-swizzled by head, so the eight heads' reads of one chunk column spread
// over the banks.
template <int D>
__device__ __forceinline__ int KeyRowsQOffset(int head, int dim) {
  return head * D + ((((dim >> 3) ^ head) & (D / 8 - 1)) << 3) + (dim & 7);
}

template <int D, int WARPS, int STAGES, int MINB, bool F8, int SPLIT = 1, bool KFV = false>
__global__ void __launch_bounds__(WARPS * 32, MINB) DecodeKeyRowsKernel(const __grid_constant__ KernelParams p) {
  using Shape = KeyRowsShape<D, WARPS, STAGES, F8, SPLIT, KFV>;
  using C = typename Shape::Loader;
  constexpr int kBN = Shape::kBN, kSteps = Shape::kSteps, kGroups = Shape::kGroups, kThreads = WARPS * 32;
  __shared__ float4 partial_s[SPLIT > 1 ? WARPS : 1][32];  // SPLIT: each warp's partial S^T
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem);  // f16 (E4M3 cache) or bf16
  uint16_t* q_rest_s = q_s + kKeyRowsMaxGroup * D;     // KFV: the second bf16 terms (0 at rotated dims)
  unsigned char* kv_s = smem + Shape::kQBytes;

  WaitForPreviousKernel();  // q and this step's K/V rows come from QKV-RoPE (PDL launch)
  BlockRange b;
  if (p.group > kKeyRowsMaxGroup || !SetUpBlock<16, kBN>(p, b)) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int group = warp / SPLIT, part = warp % SPLIT;  // this warp's 16 keys and head_dim part
  const int dim0 = part * (D / SPLIT);
  const TileCtx<C> c{p, b, D, tid, lane, 0, warp, 0, nullptr, kv_s, nullptr, nullptr, nullptr};

  // Q of the group's heads (heads past the group: zeros).
  const __nv_bfloat16* q_rows = p.q + static_cast<int64_t>(b.q_begin + b.token0) * p.num_heads * D;
  for (int i = tid; i < kKeyRowsMaxGroup * D / 2; i += kThreads) {
    const int head = (2 * i) / D, dim = (2 * i) % D;
    uint32_t v = 0;
    if (head < p.group) v = *reinterpret_cast<const uint32_t*>(q_rows + (b.head0 + head) * D + dim);
    if constexpr (F8) v = Bf16x2ToF16x2(v);
    if constexpr (KFV) {  // pairs never straddle: rope_pairs is even
      const uint32_t rest = C::Rotated(dim, p.rope_pairs) ? 0u : WeightBf16x2Exact(v, p.kv_weight + dim);
      *reinterpret_cast<uint32_t*>(q_rest_s + KeyRowsQOffset<D>(head, dim)) = rest;
    }
    *reinterpret_cast<uint32_t*>(q_s + KeyRowsQOffset<D>(head, dim)) = v;
  }
  const KvLoader<C> kv(c);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < b.num_tiles) kv.Load(s, s);
    CpAsyncCommit();
  }

  const int pos = b.pos_first;  // the query's position (one token per block)
  const bool window = p.window > 0;
  float o[kSteps][4];           // O^T: step i's 16 dims (rows) x heads 2t, 2t+1
#pragma unroll
  for (int i = 0; i < kSteps; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};  // heads 2t, 2t+1 (log2 domain)
  float row_sum[2] = {0.f, 0.f};              // this lane's keys only; summed over lanes at the end
  // ldmatrix row addresses: matrices (keys 0-7, chunk), (keys 8-15, chunk),
  // (keys 0-7, chunk + 1), (keys 8-15, chunk + 1) of this warp's 16 keys;
  // a chunk is 16 bytes (8 bf16 or 16 E4M3 dims).
  const int ld_row = 16 * group + (lane & 7) + ((lane >> 3) & 1) * 8;
  const int ld_chunk = lane >> 4;
  // Byte address of 16-byte chunk `chunk` (counted from dim0) of this lane's ldmatrix row.
  auto chunk_addr = [&](uint32_t tile, int chunk) {
    if constexpr (F8) return tile + RawOffset<D>(ld_row, dim0 + 16 * (chunk + ld_chunk));
    else return tile + 2 * TileOffset<D>(ld_row, dim0 / 8 + chunk + ld_chunk);
  };

  for (int tile = 0; tile < b.num_tiles; ++tile) {
    const int stage = tile % STAGES;
    CpAsyncWait<STAGES - 2>();
    __syncthreads();  // the tile (and, on the first, Q) visible; stage (tile - 1) % STAGES is free
    if (tile + STAGES - 1 < b.num_tiles) kv.Load(tile + STAGES - 1, (tile + STAGES - 1) % STAGES);
    CpAsyncCommit();
    const int u0 = b.tile_lo + tile * kBN;
    if (!p.length_aware && (u0 < b.valid_lo || u0 + kBN > b.valid_hi)) ZeroStaleV(c, stage, u0);
    const uint32_t k_tile = SmemAddr(c.k_stage(stage)), v_tile = SmemAddr(c.v_stage(stage));

    // S^T for this warp's 16 keys: rows keys g, g + 8; columns heads 2t, 2t + 1.
    float s[4] = {0.f, 0.f, 0.f, 0.f};
    if constexpr (F8) {
#pragma unroll
      for (int st = 0; st < kSteps; st += 2) {  // one ldmatrix: steps st and st + 1
        uint32_t r[4];
        LdMatrixX4(chunk_addr(k_tile, st), r);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint2 qb = *reinterpret_cast<const uint2*>(q_s + KeyRowsQOffset<D>(g, dim0 + 16 * (st + h) + 4 * t));
          const uint32_t lo = r[2 * h], hi = r[2 * h + 1];  // keys g and g + 8, dims 4t..4t+3
          MmaF16(s, E4m3x2ToF16x2(lo), E4m3x2ToF16x2(hi), E4m3x2ToF16x2(lo >> 16), E4m3x2ToF16x2(hi >> 16), qb.x,
                 qb.y);
        }
      }
    } else {
#pragma unroll
      for (int st = 0; st < kSteps; ++st) {  // one ldmatrix: chunks 2 st, 2 st + 1
        uint32_t r[4];
        bool any_v = false;  // KFV: a chunk of this step is not rotated (warp-uniform)
        if constexpr (KFV) {  // this lane's row: K's compact stage, or V's where its chunk is not rotated
          const int col = dim0 / 8 + 2 * st + ld_chunk;
          const bool from_k = C::Rotated(8 * col, p.rope_pairs);
          any_v = !C::Rotated(dim0 + 16 * st, p.rope_pairs) || !C::Rotated(dim0 + 16 * st + 8, p.rope_pairs);
          LdMatrixX4(from_k ? k_tile + 2 * TileOffset<C::kKeyDims>(ld_row, C::KeyChunk(col))
                            : v_tile + 2 * TileOffset<D>(ld_row, col),
                     r);
        } else {
          LdMatrixX4(chunk_addr(k_tile, 2 * st), r);
        }
        const int d = dim0 + 16 * st + 2 * t;
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(q_s + KeyRowsQOffset<D>(g, d));
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(q_s + KeyRowsQOffset<D>(g, d + 8));
        MmaBf16(s, r[0], r[1], r[2], r[3], b0, b1);
        if (KFV && any_v) {
          const uint32_t c0 = *reinterpret_cast<const uint32_t*>(q_rest_s + KeyRowsQOffset<D>(g, d));
          const uint32_t c1 = *reinterpret_cast<const uint32_t*>(q_rest_s + KeyRowsQOffset<D>(g, d + 8));
          MmaBf16(s, r[0], r[1], r[2], r[3], c0, c1);
        }
      }
    }

    if constexpr (SPLIT > 1) {  // add the pair's partial S^T (both warps then run the same softmax)
      partial_s[warp][lane] = make_float4(s[0], s[1], s[2], s[3]);
      PairBarrier(group);
      const float4 other = partial_s[warp ^ 1][lane];
      s[0] += other.x, s[1] += other.y, s[2] += other.z, s[3] += other.w;
    }

    // Online softmax per head over the warp's keys.
    const bool full = u0 >= b.valid_lo && u0 + kBN - 1 <= pos && (!window || pos - u0 < p.window);
    float x[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = s[e] * p.scale_log2;
      if (!full) {
        const int u = u0 + 16 * group + g + 8 * (e >> 1);
        if (u < 0 || u > pos || (window && pos - u >= p.window)) v = -INFINITY;
      }
      x[e] = v;
    }
    float alpha[2], m_new[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = fmaxf(x[h], x[h + 2]);
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 8));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16));
      m_new[h] = fmaxf(row_max[h], m);
      alpha[h] = m_new[h] == -INFINITY ? 1.f : Exp2(row_max[h] - m_new[h]);
      row_max[h] = m_new[h];
    }
    float pr[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) pr[e] = m_new[e & 1] == -INFINITY ? 0.f : Exp2(x[e] - m_new[e & 1]);
    row_sum[0] = row_sum[0] * alpha[0] + pr[0] + pr[2];
    row_sum[1] = row_sum[1] * alpha[1] + pr[1] + pr[3];
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int i = 0; i < kSteps; ++i) {
        o[i][0] *= alpha[0], o[i][2] *= alpha[0];
        o[i][1] *= alpha[1], o[i][3] *= alpha[1];
      }
    }
    // P^T as the B operand: (keys 2t, 2t + 1 | 2t + 8, 2t + 9; head g).
    const uint32_t pb0 = Movmatrix8x8Trans(F8 ? PackF16(pr[0], pr[1]) : PackBf16(pr[0], pr[1]));
    const uint32_t pb1 = Movmatrix8x8Trans(F8 ? PackF16(pr[2], pr[3]) : PackBf16(pr[2], pr[3]));

    // O^T += V^T P^T.
    if constexpr (F8) {
#pragma unroll
      for (int st = 0; st < kSteps; st += 2) {
        uint32_t r[4];
        LdMatrixX4Trans(chunk_addr(v_tile, st), r);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t lo = r[2 * h], hi = r[2 * h + 1];  // keys 2t, 2t + 1 (| + 8): dims 2g, 2g + 1
          MmaF16(o[st + h], E4m3x2ToF16x2(__byte_perm(lo, 0, 0x4420)), E4m3x2ToF16x2(__byte_perm(lo, 0, 0x4431)),
                 E4m3x2ToF16x2(__byte_perm(hi, 0, 0x4420)), E4m3x2ToF16x2(__byte_perm(hi, 0, 0x4431)), pb0, pb1);
        }
      }
    } else {
#pragma unroll
      for (int st = 0; st < kSteps; ++st) {
        uint32_t r[4];  // (keys 0-7 | 8-15) x (dims 16 st .. +7 | 16 st + 8 .. +15), transposed
        LdMatrixX4Trans(chunk_addr(v_tile, 2 * st), r);
        MmaBf16(o[st], r[0], r[2], r[1], r[3], pb0, pb1);
      }
    }
  }
  CpAsyncWait<0>();
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // over the lanes of a column: keys g = 0..7
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 4);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 8);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 16);
  }
  AllowDependentLaunch();  // the split merge (or the output projection) may launch now

  // The warps' states meet in shared memory (over the stages).
  __syncthreads();
  float* merge_o = reinterpret_cast<float*>(kv_s);  // [group][head][D]
  float* merge_m = merge_o + kGroups * kKeyRowsMaxGroup * D;  // [group][head]
  float* merge_l = merge_m + kGroups * kKeyRowsMaxGroup;
  float* my_o = merge_o + group * kKeyRowsMaxGroup * D + dim0;
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    if constexpr (F8) {  // rows g and g + 8: dims 2g and 2g + 1
      const int dim = 16 * i + 2 * g;
      *reinterpret_cast<float2*>(my_o + (2 * t) * D + dim) = make_float2(o[i][0], o[i][2]);
      *reinterpret_cast<float2*>(my_o + (2 * t + 1) * D + dim) = make_float2(o[i][1], o[i][3]);
    } else {  // rows g and g + 8: dims g and 8 + g
      const int dim = 16 * i + g;
      my_o[(2 * t) * D + dim] = o[i][0];
      my_o[(2 * t + 1) * D + dim] = o[i][1];
      my_o[(2 * t) * D + dim + 8] = o[i][2];
      my_o[(2 * t + 1) * D + dim + 8] = o[i][3];
    }
  }
  if (g == 0 && part == 0) {
    merge_m[group * kKeyRowsMaxGroup + 2 * t] = row_max[0];
    merge_m[group * kKeyRowsMaxGroup + 2 * t + 1] = row_max[1];
    merge_l[group * kKeyRowsMaxGroup + 2 * t] = row_sum[0];
    merge_l[group * kKeyRowsMaxGroup + 2 * t + 1] = row_sum[1];
  }
  __syncthreads();

  const int split = static_cast<int>(blockIdx.y) % p.num_splits;
  const int64_t token = b.q_begin + b.token0;
  for (int i = tid; i < p.group * D / 2; i += kThreads) {
    const int head = (2 * i) / D, dim = (2 * i) % D;
    float m_all = -INFINITY;
#pragma unroll
    for (int w = 0; w < kGroups; ++w) m_all = fmaxf(m_all, merge_m[w * kKeyRowsMaxGroup + head]);
    float2 acc = make_float2(0.f, 0.f);
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kGroups; ++w) {
      const float m = merge_m[w * kKeyRowsMaxGroup + head];
      const float scale = m == -INFINITY ? 0.f : Exp2(m - m_all);
      const float2 v = *reinterpret_cast<const float2*>(merge_o + (w * kKeyRowsMaxGroup + head) * D + dim);
      acc.x += scale * v.x, acc.y += scale * v.y;
      sum += scale * merge_l[w * kKeyRowsMaxGroup + head];
    }
    const int q_head = b.head0 + head;
    if (p.num_splits == 1) {
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      *reinterpret_cast<uint32_t*>(p.out + (token * p.num_heads + q_head) * D + dim) =
          PackBf16(acc.x * inv, acc.y * inv);
    } else {
      float* part = p.partial + ((int64_t)(b.seq * p.num_heads + q_head) * p.num_splits + split) * (D + 4);
      if (b.num_tiles > 0) *reinterpret_cast<float2*>(part + dim) = acc;  // else never read by the merge
      if (dim == 0) {
        part[D] = m_all;
        part[D + 1] = sum;
      }
    }
  }
}

template <int D, int WARPS, int STAGES, int MINB, bool F8, int SPLIT = 1, bool KFV = false>
void LaunchKeyRows(const KernelParams& p, dim3 grid, cudaStream_t stream) {
  constexpr auto kernel = DecodeKeyRowsKernel<D, WARPS, STAGES, MINB, F8, SPLIT, KFV>;
  constexpr int kSmem = KeyRowsShape<D, WARPS, STAGES, F8, SPLIT, KFV>::kSmemBytes;
  if (p.pdl) {
    LaunchWithPdl(kernel, grid, dim3(WARPS * 32), kSmem, stream, p);
    return;
  }
  kernel<<<grid, WARPS * 32, kSmem, stream>>>(p);
}

template <int D, int WARPS, int STAGES, int MINB, bool F8, int SPLIT = 1, bool KFV = false>
cudaError_t SetUpKeyRows() {
  return cudaFuncSetAttribute(DecodeKeyRowsKernel<D, WARPS, STAGES, MINB, F8, SPLIT, KFV>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              KeyRowsShape<D, WARPS, STAGES, F8, SPLIT, KFV>::kSmemBytes);
}

}  // namespace gemma::kernels::attention
