// Internal: the load, matrix and store stages of the attention tile kernel
// (tile_kernel.cuh describes the design): load Q, stream K / V tiles,
// S = Q K^T, O += P V, then the output (or split-K partials). The softmax
// stages between are in tile_softmax.cuh; TileCtx (tile_ctx.cuh) holds what
// every stage of a block shares.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/kernel_params.h"
#include "kernels/attention/tile_ctx.cuh"
#include "kernels/attention/tile_layout.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/smem_copy.cuh"

namespace gemma::kernels::attention {

// Q tile: row r -> (token b.token0 + r / hpb, head b.head0 + r % hpb).
template <class C>
__device__ __forceinline__ void LoadQ(const TileCtx<C>& c) {
  constexpr int kChunks = C::S::kChunks;
  const KernelParams& p = c.p;
  for (int i = c.tid; i < C::kBM * kChunks; i += C::kThreads) {
    const int r = i / kChunks, ch = i % kChunks;
    const int t = r / p.heads_per_block;
    const bool valid = r < p.tokens_per_block * p.heads_per_block && t < c.b.num_tokens &&
                       (!C::PAD || ch * 8 < c.hd);
    const int64_t row = valid ? (int64_t)(c.b.q_begin + c.b.token0 + t) * p.num_heads + c.b.head0 +
                                    r % p.heads_per_block
                              : 0;
    CpAsync16(SmemAddr(c.q_s + TileOffset<C::D>(r, ch)), p.q + row * c.hd + ch * 8, valid);
  }
}

// K/V loader: thread t always copies 16-byte chunk column t % kKvChunks of
// rows t / kKvChunks + k * kKvRowStep, so a row costs one multiply-add of
// address arithmetic (ring: one wrap) and two cp.async.
template <class C>
struct KvLoader {
  const TileCtx<C>& c;
  int col, row0;                // this thread's chunk column and first row
  bool col_in;                  // PAD: the chunk column lies inside head_dim
  bool k_col;                   // K's chunk column is read (KFV: only rotated dims)
  int k_chunk;                  // its column in the K stage
  int64_t pos_stride;           // elements per cache index
  const __nv_bfloat16* k_base;  // bf16 cache
  const __nv_bfloat16* v_base;
  const uint8_t* k8_base;       // E4M3 cache: one byte per element
  const uint8_t* v8_base;
  const int* table;             // paged: this sequence's block table
  int block_mask;

  __device__ __forceinline__ explicit KvLoader(const TileCtx<C>& ctx) : c(ctx) {
    const KernelParams& p = c.p;
    col = c.tid % C::kKvChunks;
    row0 = c.tid / C::kKvChunks;
    col_in = !C::PAD || col * C::kChunkElems < c.hd;
    k_col = !C::KFV || C::Rotated(col * C::kChunkElems, p.rope_pairs);
    k_chunk = C::KFV ? C::KeyChunk(col) : col;
    pos_stride = (int64_t)p.num_kv_heads * c.hd;
    const int64_t base = ((int64_t)c.b.slot * p.capacity * p.num_kv_heads + c.b.kv_head) * c.hd + col * C::kChunkElems;
    k_base = p.k + base;
    v_base = p.v + base;
    k8_base = reinterpret_cast<const uint8_t*>(p.k) + base;
    v8_base = reinterpret_cast<const uint8_t*>(p.v) + base;
    table = p.block_tables ? p.block_tables + p.table_offsets[c.b.seq] : nullptr;
    block_mask = (1 << p.block_shift) - 1;
  }

  __device__ __forceinline__ void CopyRow(uint32_t ks, uint32_t vs, int r, int64_t off, bool valid) const {
    if constexpr (C::PAD) valid = valid && col_in;
    const uint32_t dst = C::KvChunkOffset(r, col);
    if constexpr (C::F8) {
      CpAsync16(ks + dst, k8_base + off, valid);
      CpAsync16(vs + dst, v8_base + off, valid);
    } else {
      if constexpr (C::KFV) {
        if (k_col) CpAsync16(ks + 2 * TileOffset<C::kKeyDims>(r, k_chunk), k_base + off, valid);
      } else {
        CpAsync16(ks + dst, k_base + off, valid);
      }
      CpAsync16(vs + dst, v_base + off, valid);
    }
  }

  // Key tile `tile` (positions tile_lo + tile * BN ...) into stage `stage`.
  __device__ __forceinline__ void Load(int tile, int stage) const {
    const KernelParams& p = c.p;
    const BlockRange& b = c.b;
    constexpr int row_step = C::kKvRowStep;
    const int u0 = b.tile_lo + tile * C::BN;
    const uint32_t ks = SmemAddr(c.k_stage(stage)), vs = SmemAddr(c.v_stage(stage));
    if (table != nullptr) {  // paged: one table lookup per row
#pragma unroll 4
      for (int r = row0; r < C::BN; r += row_step) {
        const int u = u0 + r;
        const bool valid = u >= b.valid_lo && u < b.valid_hi;
        const int64_t idx = valid ? ((int64_t)__ldg(table + (u >> p.block_shift)) << p.block_shift) + (u & block_mask) : 0;
        CopyRow(ks, vs, r, idx * pos_stride, valid);
      }
      return;
    }
    int idx = p.ring ? ((u0 + row0) % p.capacity + p.capacity) % p.capacity : 0;
#pragma unroll 4
    for (int r = row0; r < C::BN; r += row_step) {
      const int u = u0 + r;
      bool valid;
      if (p.ring) {
        valid = u >= 0 && (!p.length_aware || (u >= b.valid_lo && u < b.valid_hi));
      } else {
        idx = u;
        valid = u >= 0 && u < p.capacity && (!p.length_aware || u < b.valid_hi);
      }
      const int64_t off = valid ? idx * pos_stride : 0;
      CopyRow(ks, vs, r, off, valid);
      if (p.ring) {
        idx += row_step;
        while (idx >= p.capacity) idx -= p.capacity;
      }
    }
  }
};

// E4M3 cache, first tile: Q to f16 in the permuted order: within every 16
// dims, position k holds dim 4 (k / 2) + k % 2 for k < 8, dim 4 ((k - 8) /
// 2) + 2 + k % 2 above (pairs (0,1) (4,5) (8,9) (12,13) | (2,3) (6,7)
// (10,11) (14,15)).
template <class C>
__device__ __forceinline__ void PermuteQToF16(const TileCtx<C>& c) {
  constexpr int D = C::D;
  for (int i = c.tid; i < C::kBM * D / 16; i += C::kThreads) {
    const int r = i / (D / 16), g = i % (D / 16);
    uint4* lo = reinterpret_cast<uint4*>(c.q_s + TileOffset<D>(r, 2 * g));
    uint4* hi = reinterpret_cast<uint4*>(c.q_s + TileOffset<D>(r, 2 * g + 1));
    const uint4 x = *lo, y = *hi;
    *lo = make_uint4(Bf16x2ToF16x2(x.x), Bf16x2ToF16x2(x.z), Bf16x2ToF16x2(y.x), Bf16x2ToF16x2(y.z));
    *hi = make_uint4(Bf16x2ToF16x2(x.y), Bf16x2ToF16x2(x.w), Bf16x2ToF16x2(y.y), Bf16x2ToF16x2(y.w));
  }
  __syncthreads();
}

// The A fragment of this warp's m16 tile i, 16 dims ks of its columns.
template <class C>
__device__ __forceinline__ void LoadQFrag(const TileCtx<C>& c, int i, int ks, uint32_t (&a)[4]) {
  const int r = c.wm * C::kWR + i * 16 + (c.lane & 15);
  const int col = (c.wd * C::kDW + ks * 16) / 8 + (c.lane >> 4);
  LdMatrixX4(SmemAddr(c.q_s + TileOffset<C::D>(r, col)), a);
}

// KFV: Q's unrotated columns of fragment (this warp, 16 dims ks) times
// kv_weight, rounded to bf16 in rows 0-7 and what the rounding left out
// (zero in rotated columns) as a second bf16 term in rows 8-15, whose own
// Q rows are never live (tile_kernel.cuh). ComputeS adds accumulator rows
// r + 8 to rows r: Q (kv_weight * V)^T with V's own bf16 rounding only, as
// close to the math as the plain kernel reading K = bf16(kv_weight *
// rms0(k)) (one rounding each).
// A fragment register holds columns 2 (lane % 4) + {0, 1} (registers 0, 1)
// and + 8 (registers 2, 3) of rows lane / 4 (registers 0, 2) and lane / 4 +
// 8 (registers 1, 3).
template <class C>
__device__ __forceinline__ void FoldKeyWeight(const TileCtx<C>& c, int ks, uint32_t (&a)[4]) {
  const int d0 = c.wd * C::kDW + ks * 16 + 2 * (c.lane & 3);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int d = d0 + 8 * half;  // pairs never straddle: rope_pairs is even
    a[2 * half + 1] = C::Rotated(d, c.p.rope_pairs) ? 0u : WeightBf16x2Exact(a[2 * half], c.p.kv_weight + d);
  }
}

// Keys outside [valid_lo, valid_hi) were read only in length-unaware mode
// and may hold anything (NaN): their V rows must be zero, since 0 * NaN
// would poison the P V product.
template <class C>
__device__ __forceinline__ void ZeroStaleV(const TileCtx<C>& c, int stage, int u0) {
  unsigned char* vz = c.v_stage(stage);
  constexpr int chunks = C::kKvChunks;
  for (int i = c.tid; i < C::BN * chunks; i += C::kThreads) {
    const int r = i / chunks, u = u0 + r;
    if (u >= c.b.valid_lo && u < c.b.valid_hi) continue;
    uint4* z = reinterpret_cast<uint4*>(vz + C::KvChunkOffset(r, i % chunks));
    *z = make_uint4(0, 0, 0, 0);
  }
  __syncthreads();
}

// S = Q K^T over this warp's head_dim columns; each K fragment feeds the
// warp's MR row tiles. E4M3: one ldmatrix gives 32 keys (register j: keys
// 8j..8j+7) x 16 dims, already in the permuted fragment order. KFV: each
// lane's ldmatrix row address is in the V tile where its 8 dims are not
// rotated (Q holds kv_weight there), and accumulator rows 8-15 (the second
// terms, FoldKeyWeight) are added to rows 0-7, which rows 8-15 then repeat
// (never stored).
template <class C>
__device__ __forceinline__ void ComputeS(const TileCtx<C>& c, const unsigned char* k_tile, const unsigned char* v_tile,
                                         uint32_t (&q_frag)[C::MR][C::kQFrags][4], float (&s)[C::MR][C::kNT][4]) {
  constexpr int MR = C::MR, D = C::D, kDW = C::kDW;
  constexpr bool kQInRegs = C::S::kQInRegs;
  const int lane = c.lane;
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int n = 0; n < C::kNT; ++n) s[i][n][0] = s[i][n][1] = s[i][n][2] = s[i][n][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < kDW / 16; ++ks) {
    uint32_t a_tmp[MR][4];
    if constexpr (!kQInRegs) {
#pragma unroll
      for (int i = 0; i < MR; ++i) LoadQFrag(c, i, ks, a_tmp[i]);
    }
    if constexpr (C::F8) {
#pragma unroll
      for (int n4 = 0; n4 < C::BN / 32; ++n4) {
        uint32_t bk[4];
        LdMatrixX4(SmemAddr(k_tile + RawOffset<D>(n4 * 32 + lane, c.wd * kDW + ks * 16)), bk);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t b0 = E4m3x2ToF16x2(bk[j]), b1 = E4m3x2ToF16x2(bk[j] >> 16);
#pragma unroll
          for (int i = 0; i < MR; ++i) {
            const uint32_t(&a)[4] = kQInRegs ? q_frag[i][kQInRegs ? ks : 0] : a_tmp[i];
            MmaF16(s[i][4 * n4 + j], a[0], a[1], a[2], a[3], b0, b1);
          }
        }
      }
    } else {
      const int col = (c.wd * kDW + ks * 16) / 8 + ((lane >> 3) & 1);
      // This lane's ldmatrix row address: K's stage, or (KFV, unrotated) V's.
      bool from_k = true;
      if constexpr (C::KFV) from_k = C::Rotated(col * 8, c.p.rope_pairs);
      const __nv_bfloat16* ks_s = reinterpret_cast<const __nv_bfloat16*>(from_k ? k_tile : v_tile);
#pragma unroll
      for (int n2 = 0; n2 < C::BN / 16; ++n2) {
        uint32_t bk[4];
        const int r = n2 * 16 + (lane & 7) + ((lane >> 4) << 3);
        const int offset = C::KFV && from_k ? TileOffset<C::kKeyDims>(r, C::KeyChunk(col)) : TileOffset<D>(r, col);
        LdMatrixX4(SmemAddr(ks_s + offset), bk);
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          const uint32_t(&a)[4] = kQInRegs ? q_frag[i][kQInRegs ? ks : 0] : a_tmp[i];
          Mma16816(s[i][2 * n2], a, bk[0], bk[1]);
          Mma16816(s[i][2 * n2 + 1], a, bk[2], bk[3]);
        }
      }
    }
  }
  if constexpr (C::KFV) {
#pragma unroll
    for (int n = 0; n < C::kNT; ++n) {
      s[0][n][0] += s[0][n][2];
      s[0][n][1] += s[0][n][3];
      s[0][n][2] = s[0][n][0];
      s[0][n][3] = s[0][n][1];
    }
  }
}

// P as bf16 (F8: f16) A fragments (the accumulator layout is the A layout):
// from registers, or with PX gathered from the row group's warps.
template <class C>
__device__ __forceinline__ void PFragment(const TileCtx<C>& c, const float (&x)[C::MR][C::kOwn][4],
                                          const __nv_bfloat162 (&p_scale)[C::MR][2][C::PX == 2 ? C::WD : 1], int i,
                                          int kk, uint32_t (&a)[4]) {
  constexpr int PX = C::PX;
  if constexpr (PX != 0) {
    const uint2 lo = c.p_at(i, 2 * kk), hi = c.p_at(i, 2 * kk + 1);
    a[0] = lo.x, a[1] = lo.y, a[2] = hi.x, a[3] = hi.y;
    if constexpr (PX == 2) {
      constexpr int kW = PX == 2 ? C::WD : 1;
      const int w0 = min(2 * kk / C::kOwn, kW - 1), w1 = min((2 * kk + 1) / C::kOwn, kW - 1);
      a[0] = ScaleBf16x2(a[0], p_scale[i][0][w0]);
      a[1] = ScaleBf16x2(a[1], p_scale[i][1][w0]);
      a[2] = ScaleBf16x2(a[2], p_scale[i][0][w1]);
      a[3] = ScaleBf16x2(a[3], p_scale[i][1][w1]);
    }
  } else {
    const int k0 = PX ? 0 : 2 * kk, k1 = PX ? 0 : 2 * kk + 1;  // compile-time indices
    a[0] = C::PackP(x[i][k0][0], x[i][k0][1]);
    a[1] = C::PackP(x[i][k0][2], x[i][k0][3]);
    a[2] = C::PackP(x[i][k1][0], x[i][k1][1]);
    a[3] = C::PackP(x[i][k1][2], x[i][k1][3]);
  }
}

// O += P V over this warp's columns; each V fragment feeds MR row tiles.
// E4M3: one ldmatrix.trans gives, in registers 0, 1, keys +0 / +8 of 16-dim
// chunk 2 n4 and in registers 2, 3 the same of chunk 2 n4 + 1; each pair
// gives the even-dim (bytes 0, 2) and odd-dim (bytes 1, 3) n8 tiles.
template <class C>
__device__ __forceinline__ void AccumulatePV(const TileCtx<C>& c, const unsigned char* v_tile,
                                             const float (&x)[C::MR][C::kOwn][4],
                                             const __nv_bfloat162 (&p_scale)[C::MR][2][C::PX == 2 ? C::WD : 1],
                                             float (&o)[C::MR][C::kDW / 8][4]) {
  constexpr int MR = C::MR, D = C::D, kDW = C::kDW;
  const int lane = c.lane;
#pragma unroll
  for (int kk = 0; kk < C::BN / 16; ++kk) {
    uint32_t a[MR][4];
#pragma unroll
    for (int i = 0; i < MR; ++i) PFragment(c, x, p_scale, i, kk, a[i]);
    if constexpr (C::F8) {
#pragma unroll
      for (int n4 = 0; n4 < kDW / 32; ++n4) {
        uint32_t bv[4];
        const int m = lane >> 3;
        LdMatrixX4Trans(SmemAddr(v_tile + RawOffset<D>(kk * 16 + ((m & 1) << 3) + (lane & 7),
                                                       c.wd * kDW + n4 * 32 + ((m >> 1) << 4))),
                        bv);
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const uint32_t xv = __byte_perm(bv[t & ~1], bv[t | 1], (t & 1) ? 0x7531 : 0x6420);
          const uint32_t b0 = E4m3x2ToF16x2(xv), b1 = E4m3x2ToF16x2(xv >> 16);
#pragma unroll
          for (int i = 0; i < MR; ++i) MmaF16(o[i][4 * n4 + t], a[i][0], a[i][1], a[i][2], a[i][3], b0, b1);
        }
      }
    } else {
      const __nv_bfloat16* vs_s = reinterpret_cast<const __nv_bfloat16*>(v_tile);
#pragma unroll
      for (int n2 = 0; n2 < kDW / 16; ++n2) {
        uint32_t bv[4];
        const int r = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        const int col = (c.wd * kDW + n2 * 16) / 8 + (lane >> 4);
        LdMatrixX4Trans(SmemAddr(vs_s + TileOffset<D>(r, col)), bv);
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          Mma16816(o[i][2 * n2], a[i], bv[0], bv[1]);
          Mma16816(o[i][2 * n2 + 1], a[i], bv[2], bv[3]);
        }
      }
    }
  }
}

// One split: normalize, stage this warp's [kWR, kDW] piece in its own
// corner of q_s (only this warp ever read it), then write 16-byte rows.
// E4M3: n8 tiles 2q (even dims) and 2q + 1 (odd) of chunk q hold dims
// 16q + 4c .. + 3.
template <class C>
__device__ __forceinline__ void StoreOutput(const TileCtx<C>& c, const float (&o)[C::MR][C::kDW / 8][4],
                                            const float (&row_sum)[C::MR][2], int rows_valid) {
  constexpr int D = C::D, kDW = C::kDW;
  const KernelParams& p = c.p;
  const int lane = c.lane, wd = c.wd;
  if (c.b.num_tiles == 0) __syncthreads();  // q_s may still be loading
#pragma unroll
  for (int i = 0; i < C::MR; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float inv = row_sum[i][h] > 0.f ? 1.f / row_sum[i][h] : 0.f;
      const int r = c.acc_row(i, h);
      if constexpr (C::F8) {
#pragma unroll
        for (int q = 0; q < kDW / 16; ++q) {
          const int col = wd * kDW + q * 16 + ((lane & 3) << 2);
          *reinterpret_cast<uint2*>(c.q_s + TileOffset<D>(r, col / 8) + (col & 7)) =
              make_uint2(PackBf16(o[i][2 * q][2 * h] * inv, o[i][2 * q + 1][2 * h] * inv),
                         PackBf16(o[i][2 * q][2 * h + 1] * inv, o[i][2 * q + 1][2 * h + 1] * inv));
        }
      } else {
#pragma unroll
        for (int n = 0; n < kDW / 8; ++n) {
          const int col = wd * kDW + n * 8 + ((lane & 3) << 1);
          *reinterpret_cast<uint32_t*>(c.q_s + TileOffset<D>(r, col / 8) + (col & 7)) =
              PackBf16(o[i][n][2 * h] * inv, o[i][n][2 * h + 1] * inv);
        }
      }
    }
  }
  __syncwarp();
  constexpr int kWarpChunks = kDW / 8;
  for (int i = lane; i < C::kWR * kWarpChunks; i += 32) {
    const int r = c.wm * C::kWR + i / kWarpChunks;
    const int ch = wd * kWarpChunks + i % kWarpChunks;
    if (r >= rows_valid || (C::PAD && ch * 8 >= c.hd)) continue;
    const int64_t row = (int64_t)(c.b.q_begin + c.b.token0 + r / p.heads_per_block) * p.num_heads + c.b.head0 +
                        r % p.heads_per_block;
    *reinterpret_cast<uint4*>(p.out + row * c.hd + ch * 8) =
        *reinterpret_cast<const uint4*>(c.q_s + TileOffset<D>(r, ch));
  }
}

// Split-K partials: [seq][head][split] x (acc[hd], max, sum, 2 pad), unnormalized;
// a block without keys (a split past the sequence's length) writes max and sum only.
template <class C>
__device__ __forceinline__ void StorePartials(const TileCtx<C>& c, const float (&o)[C::MR][C::kDW / 8][4],
                                              const float (&row_max)[C::MR][2], const float (&row_sum)[C::MR][2],
                                              int rows_valid) {
  constexpr int kDW = C::kDW;
  const KernelParams& p = c.p;
  const int lane = c.lane, wd = c.wd, hd = c.hd;
  const int split = static_cast<int>(blockIdx.y) % p.num_splits;
#pragma unroll
  for (int i = 0; i < C::MR; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = c.acc_row(i, h);
      if (r >= rows_valid) continue;
      const int head = c.b.head0 + r % p.heads_per_block;
      float* part = p.partial + ((int64_t)(c.b.seq * p.num_heads + head) * p.num_splits + split) * (hd + 4);
      if (wd == 0 && (lane & 3) == 0) {
        part[hd] = row_max[i][h];
        part[hd + 1] = row_sum[i][h];
      }
      if (c.b.num_tiles == 0) continue;  // no keys: the merge never reads this accumulator
      if constexpr (C::F8) {
#pragma unroll
        for (int q = 0; q < kDW / 16; ++q) {
          const int col = wd * kDW + q * 16 + ((lane & 3) << 2);
          if (C::PAD && col >= hd) continue;
          *reinterpret_cast<float4*>(part + col) =
              make_float4(o[i][2 * q][2 * h], o[i][2 * q + 1][2 * h], o[i][2 * q][2 * h + 1], o[i][2 * q + 1][2 * h + 1]);
        }
      } else {
#pragma unroll
        for (int n = 0; n < kDW / 8; ++n) {
          const int col = wd * kDW + n * 8 + ((lane & 3) << 1);
          if (C::PAD && col >= hd) continue;
          *reinterpret_cast<float2*>(part + col) = make_float2(o[i][n][2 * h], o[i][n][2 * h + 1]);
        }
      }
    }
  }
}

}  // namespace gemma::kernels::attention
