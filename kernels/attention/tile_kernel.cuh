// The one attention kernel template behind prefill and decode: a tiled flash
// attention over bf16 tensor-core MMA (mma.sync m16n8k16; f16 over an E4M3
// cache, see F8 below) with an fp32 online softmax. Included only by the
// per-head_dim instance files.
//
// A block owns BM = 16 * MR * WM rows. Row r is (token, head) = (m_tile *
// tokens_per_block + r / heads_per_block, head0 + r % heads_per_block):
// prefill uses one head per block (rows = tokens), decode all heads of a KV
// group (rows = heads, GQA: each K/V row is read once for the group).
// Warps form a WM x WD grid: warp (wm, wd) owns rows [16 MR wm, 16 MR (wm + 1))
// (MR m16 tiles, so each K/V fragment it reads feeds MR MMAs) and head_dim
// columns [wd * D/WD, (wd + 1) * D/WD) of the output accumulator, so the fp32
// accumulator is MR * D / (2 WD) registers per thread. With WD > 1 the warps
// of a row group each compute a partial Q K^T over their columns and sum the
// partials through shared memory; each then runs the (cheap) softmax itself,
// or with PX ("P exchange") each sums and softmaxes only BN / WD of the keys
// (row maxima exchanged through shared memory) and the warps gather the bf16
// P tile from each other: fewer shared-memory bytes, two more barriers.
//
// Keys are sequence positions; position u of slot s lives at cache index
// (ring ? u % capacity : u), or in a paged cache at the row its block table
// names (attention.h). A block walks key tiles of BN positions over its
// range [lo, hi), split into `num_splits` parts (decode: split-K). With one
// split it writes the normalized output; with more it writes fp32 partials
// (acc, max, sum) for the combine kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/kernel_params.h"
#include "kernels/attention/tile_ctx.cuh"
#include "kernels/attention/tile_layout.cuh"
#include "kernels/attention/tile_softmax.cuh"
#include "kernels/attention/tile_stages.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/smem_copy.cuh"

namespace gemma::kernels::attention {

// F8: the cache holds E4M3 codes (KernelParams::kv_fp8); a separate
// instantiation, so the bf16 kernels keep their registers and schedule (a
// runtime switch cost the bf16 decode kernel ~40 more registers and ~20 %
// of its speed on the H200). Its MMAs are f16 (E4M3 widens to f16 in one
// instruction): the stages hold raw E4M3 tiles (half the bytes), ldmatrix
// reads them as if they were 16-bit, and the head_dim order is permuted so
// that what each lane receives is already its fragment:
//  - K (ldmatrix): a lane gets dims 4c..4c+3 of its key (c = lane % 4), which
//    serve as MMA k indices 2c, 2c+1, 2c+8, 2c+9; Q is rewritten once (f16,
//    same permutation inside every 16 dims) so that ldmatrix gives matching A
//    fragments.
//  - V (ldmatrix.trans): a lane gets keys 2c, 2c+1 of dims 2j, 2j+1 (j =
//    lane / 4); two such registers (keys +0, +8) byte-permute into the B
//    fragments of an even-dim and an odd-dim n8 tile, so output column n of
//    16-dim chunk q is dim 16q + 2n (even tile) or 16q + 2n + 1 (odd tile).
// MINB: blocks per multiprocessor the registers must allow (launch bounds).
// PAD: the tensors' head_dim is p.head_dim, a multiple of 16 below D (a
// head_dim without an instance of its own): Q and K / V columns from
// p.head_dim on load as zeros (they add nothing to Q K^T, and the P V
// columns they make are never stored); global rows are p.head_dim apart.
// KFV: keys from values (decode over a bf16 cache of a layer whose V is the
// unweighted K before RoPE, Gemma 4's global layers): K's unrotated dims
// are kv_weight * V, so only K's rotated dims are copied (into K stages of
// TileConfig::kKeyDims columns), Q K^T reads the V tile for the other dims,
// and kv_weight is folded into those Q columns once. At 512 dims with 64
// rotated pairs that is 5/8 of the bytes and 5/8 of the stage memory. A
// KFV block has one m16 tile and at most 8 live rows (one token of a GQA
// group of <= 8 heads, ServesKeysFromValues), so rows 8-15 carry what
// rounding kv_weight * Q to bf16 left out (FoldKeyWeight) and one MMA per
// fragment gives both terms (ComputeS).
template <int D, int WM, int WD, int BN, int STAGES, int MR = 1, int PX = 0, bool F8 = false, int MINB = 1,
          bool PAD = false, bool KFV = false>
__global__ void __launch_bounds__(TileShape<D, WM, WD, BN, STAGES, MR, PX>::kThreads, MINB)
    AttentionTileKernel(const __grid_constant__ KernelParams p) {
  using C = TileConfig<D, WM, WD, BN, STAGES, MR, PX, F8, PAD, KFV>;
  using S = typename C::S;
  constexpr int kBM = C::kBM, kDW = C::kDW;
  static_assert(!KFV || (!F8 && S::kQInRegs && kBM == 16), "keys from values: bf16 cache, Q fragments in "
                "registers, one m16 tile");
  extern __shared__ __align__(128) unsigned char smem[];
  // Q, then the K stages, the V stages and the reduction space.
  unsigned char* kv_s = smem + S::kQBytes;
  float4* red_s = reinterpret_cast<float4*>(kv_s + STAGES * (S::kKStageBytes + S::kKvStageBytes));

  WaitForPreviousKernel();  // q and this step's K/V rows come from QKV-RoPE (PDL launch: decode)
  BlockRange b;
  if (!SetUpBlock<kBM, BN>(p, b)) return;
  const int tid = threadIdx.x, warp = tid >> 5;
  const TileCtx<C> c{p,
                     b,
                     PAD ? p.head_dim : D,
                     tid,
                     tid & 31,
                     warp % WM,
                     warp / WM,
                     PX ? (warp / WM) * C::kOwn : 0,
                     reinterpret_cast<__nv_bfloat16*>(smem),
                     kv_s,
                     red_s,
                     reinterpret_cast<float*>(red_s) + WD * kBM * BN,
                     reinterpret_cast<uint2*>(red_s)};

  LoadQ(c);
  const KvLoader<C> kv(c);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < b.num_tiles) kv.Load(s, s);
    CpAsyncCommit();
  }

  int row_pos[MR][2];  // the query position of each accumulator row
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) row_pos[i][h] = min(b.pos_first + c.acc_row(i, h) / p.heads_per_block, b.pos_last);
  float o[MR][kDW / 8][4];
  float row_max[MR][2], row_sum[MR][2];
#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int n = 0; n < kDW / 8; ++n) o[i][n][0] = o[i][n][1] = o[i][n][2] = o[i][n][3] = 0.f;
    row_max[i][0] = row_max[i][1] = -INFINITY;
    row_sum[i][0] = row_sum[i][1] = 0.f;
  }
  uint32_t q_frag[MR][C::kQFrags][4];

  for (int tile = 0; tile < b.num_tiles; ++tile) {
    const int stage = tile % STAGES;
    CpAsyncWait<STAGES - 2>();
    __syncthreads();  // tile visible to all; stage (tile - 1) % STAGES is free
    if (tile + STAGES - 1 < b.num_tiles) kv.Load(tile + STAGES - 1, (tile + STAGES - 1) % STAGES);
    CpAsyncCommit();
    if constexpr (F8) {
      if (tile == 0) PermuteQToF16(c);
    }
    if constexpr (S::kQInRegs) {
      if (tile == 0) {
#pragma unroll
        for (int i = 0; i < MR; ++i)
#pragma unroll
          for (int ks = 0; ks < kDW / 16; ++ks) {
            LoadQFrag(c, i, ks, q_frag[i][ks]);
            if constexpr (KFV) FoldKeyWeight(c, ks, q_frag[i][ks]);
          }
      }
    }
    const int u0 = b.tile_lo + tile * BN;
    if (!p.length_aware && (u0 < b.valid_lo || u0 + BN > b.valid_hi)) ZeroStaleV(c, stage, u0);

    float s[MR][C::kNT][4];
    ComputeS(c, c.k_stage(stage), c.v_stage(stage), q_frag, s);
    float x[MR][C::kOwn][4];
    SumColumnWarps(c, s, x);
    MaskAndScale(c, u0, row_pos, x);
    __nv_bfloat162 p_scale[MR][2][PX == 2 ? WD : 1];
    OnlineSoftmax(c, x, row_max, row_sum, o, p_scale);
    AccumulatePV(c, c.v_stage(stage), x, p_scale, o);
  }
  CpAsyncWait<0>();
  FinishRowSums(c, row_sum);

  AllowDependentLaunch();  // the split merge (or the output projection) may launch now
  const int rows_valid = min(p.tokens_per_block, b.num_tokens) * p.heads_per_block;
  if (p.num_splits == 1) {
    StoreOutput(c, o, row_sum, rows_valid);
  } else {
    StorePartials(c, o, row_max, row_sum, rows_valid);
  }
}

}  // namespace gemma::kernels::attention
