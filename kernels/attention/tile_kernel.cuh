// The one attention kernel template behind prefill and decode: a tiled flash
// attention over bf16 tensor-core MMA (mma.sync m16n8k16) with an fp32 online
// softmax. Included only by the per-head_dim instance files.
//
// A block owns BM = 16 * WM rows. Row r is (token, head) = (m_tile *
// tokens_per_block + r / heads_per_block, head0 + r % heads_per_block):
// prefill uses one head per block (rows = tokens), decode all heads of a KV
// group (rows = heads, GQA: each K/V row is read once for the group).
// Warps form a WM x WD grid: warp (wm, wd) owns rows [16 wm, 16 wm + 16) and
// head_dim columns [wd * D/WD, (wd + 1) * D/WD) of the output accumulator, so
// the fp32 accumulator is D / (2 WD) registers per thread. With WD > 1 the warps
// of a row group each compute a partial Q K^T over their columns and sum the
// partials through shared memory; each then runs the (cheap) softmax itself.
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

namespace gemma::kernels::attention {

template <int D, int WM, int WD, int BN, int STAGES>
struct TileShape {
  static constexpr int kWarps = WM * WD;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBM = 16 * WM;
  static constexpr int kDW = D / WD;              // head_dim columns per warp
  static constexpr int kChunks = D / 8;           // 16-byte chunks per row
  static constexpr int kSwizzle = (kChunks < 8 ? kChunks : 8) - 1;
  static constexpr int kAccFloats = kDW / 2;      // per thread
  static constexpr int kSFloats = BN / 2;         // per thread
  // Q fragments stay in registers when they fit next to the accumulator.
  static constexpr bool kQInRegs = kDW / 4 + kAccFloats <= 128;
  static constexpr int kQBytes = kBM * D * 2;
  static constexpr int kKvStageBytes = BN * D * 2;
  static constexpr int kRedBytes = WD > 1 ? WD * kBM * BN * 4 : 0;
  static constexpr int kSmemBytes = kQBytes + 2 * STAGES * kKvStageBytes + kRedBytes;
  static_assert(kDW % 16 == 0 && BN % 16 == 0 && STAGES >= 2, "bad tile");
};

// ---- PTX helpers -----------------------------------------------------------

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, bool valid) {
  int src_bytes = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void LdMatrixX4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// c += a (16x16, row) * b (16x8, col); bf16 in, fp32 accumulate.
__device__ __forceinline__ void Mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float Exp2(float x) {  // ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Element offset of (row, 16-byte chunk) in a [rows][D] bf16 tile; the XOR
// swizzle keeps ldmatrix's 8 row reads of one column conflict-free.
template <int D>
__device__ __forceinline__ int TileOffset(int row, int chunk) {
  constexpr int kChunks = D / 8;
  constexpr int kSwizzle = (kChunks < 8 ? kChunks : 8) - 1;
  return row * D + ((chunk ^ (row & kSwizzle)) << 3);
}

// ---- per-block bookkeeping --------------------------------------------------

struct BlockRange {
  int seq, slot, q_len, q_begin;  // q_begin: token index of the sequence's query 0
  int head0, kv_head;
  int token0;                     // first token (relative to the sequence) of this block
  int num_tokens;                 // valid tokens in this block
  int pos_first, pos_last;        // positions of the first and last valid token
  int valid_lo, valid_hi;         // keys that exist: [valid_lo, valid_hi)
  int tile_lo, num_tiles;         // this split's tiles: positions tile_lo + t * BN
};

template <int BM, int BN>
__device__ __forceinline__ bool SetUpBlock(const KernelParams& p, BlockRange& b) {
  b.seq = blockIdx.z;
  const int m_tiles = gridDim.y / p.num_splits;
  const int m_tile = m_tiles - 1 - static_cast<int>(blockIdx.y) / p.num_splits;  // long first
  const int split = static_cast<int>(blockIdx.y) % p.num_splits;
  b.slot = p.block_tables ? 0 : p.seq_slot[b.seq];
  b.q_begin = p.q_offsets[b.seq];
  b.q_len = p.q_offsets[b.seq + 1] - b.q_begin;
  b.token0 = m_tile * p.tokens_per_block;
  if (b.slot < 0 || b.slot >= p.num_slots || b.token0 >= b.q_len) return false;
  b.num_tokens = min(p.tokens_per_block, b.q_len - b.token0);
  b.head0 = blockIdx.x * p.heads_per_block;
  b.kv_head = b.head0 / p.group;
  const int pos0 = p.q_pos0[b.seq];
  b.pos_first = pos0 + b.token0;
  b.pos_last = b.pos_first + b.num_tokens - 1;
  b.valid_hi = b.pos_last + 1;
  b.valid_lo = p.window > 0 ? max(0, b.pos_first - p.window + 1) : 0;
  int lo = b.valid_lo, hi = b.valid_hi;
  if (!p.length_aware) {
    hi = p.ring ? b.valid_hi : p.capacity;
    lo = p.ring ? hi - p.capacity : 0;
  }
  const int total_tiles = (hi - lo + BN - 1) / BN;
  const int per_split = (total_tiles + p.num_splits - 1) / p.num_splits;
  const int first = min(split * per_split, total_tiles);
  b.num_tiles = min(per_split, total_tiles - first);
  b.tile_lo = lo + first * BN;
  return true;
}

// ---- the kernel ---------------------------------------------------------------

template <int D, int WM, int WD, int BN, int STAGES>
__global__ void __launch_bounds__(TileShape<D, WM, WD, BN, STAGES>::kThreads, 1)
    AttentionTileKernel(const __grid_constant__ KernelParams p) {
  using S = TileShape<D, WM, WD, BN, STAGES>;
  constexpr int kBM = S::kBM, kDW = S::kDW, kChunks = S::kChunks;
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* k_s = q_s + kBM * D;
  __nv_bfloat16* v_s = k_s + STAGES * BN * D;
  float4* red_s = reinterpret_cast<float4*>(v_s + STAGES * BN * D);

  BlockRange b;
  if (!SetUpBlock<kBM, BN>(p, b)) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WM, wd = warp / WM;

  // Q tile: row r -> (token b.token0 + r / hpb, head b.head0 + r % hpb).
  for (int i = tid; i < kBM * kChunks; i += S::kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int t = r / p.heads_per_block;
    const bool valid = r < p.tokens_per_block * p.heads_per_block && t < b.num_tokens;
    const int64_t row = valid ? (int64_t)(b.q_begin + b.token0 + t) * p.num_heads + b.head0 +
                                    r % p.heads_per_block
                              : 0;
    CpAsync16(SmemAddr(q_s + TileOffset<D>(r, c)), p.q + row * D + c * 8, valid);
  }

  // K/V loader: thread t always copies 16-byte chunk column t % kChunks of
  // rows t / kChunks + k * kRowStep, so a row costs one multiply-add of
  // address arithmetic (ring: one wrap) and two cp.async.
  static_assert(S::kThreads % kChunks == 0, "a pass must cover whole rows");
  constexpr int kRowStep = S::kThreads / kChunks;
  const int ld_c = tid % kChunks, ld_r0 = tid / kChunks;
  const int64_t pos_stride = (int64_t)p.num_kv_heads * D;  // elements per cache index
  const int64_t kv_base =
      ((int64_t)b.slot * p.capacity * p.num_kv_heads + b.kv_head) * D + ld_c * 8;
  const __nv_bfloat16* k_base = p.k + kv_base;
  const __nv_bfloat16* v_base = p.v + kv_base;
  const int* table = p.block_tables ? p.block_tables + p.table_offsets[b.seq] : nullptr;
  const int block_mask = (1 << p.block_shift) - 1;
  auto load_kv = [&](int tile, int stage) {
    const int u0 = b.tile_lo + tile * BN;
    const uint32_t ks = SmemAddr(k_s + stage * BN * D), vs = SmemAddr(v_s + stage * BN * D);
    if (table != nullptr) {  // paged: one table lookup per row
#pragma unroll 4
      for (int r = ld_r0; r < BN; r += kRowStep) {
        const int u = u0 + r;
        const bool valid = u >= b.valid_lo && u < b.valid_hi;
        const int64_t idx = valid ? ((int64_t)__ldg(table + (u >> p.block_shift)) << p.block_shift) + (u & block_mask) : 0;
        const uint32_t dst = TileOffset<D>(r, ld_c) * 2;
        CpAsync16(ks + dst, k_base + idx * pos_stride, valid);
        CpAsync16(vs + dst, v_base + idx * pos_stride, valid);
      }
      return;
    }
    int idx = p.ring ? ((u0 + ld_r0) % p.capacity + p.capacity) % p.capacity : 0;
#pragma unroll 4
    for (int r = ld_r0; r < BN; r += kRowStep) {
      const int u = u0 + r;
      bool valid;
      if (p.ring) {
        valid = u >= 0 && (!p.length_aware || (u >= b.valid_lo && u < b.valid_hi));
      } else {
        idx = u;
        valid = u >= 0 && u < p.capacity && (!p.length_aware || u < b.valid_hi);
      }
      const int64_t off = valid ? idx * pos_stride : 0;
      const uint32_t dst = TileOffset<D>(r, ld_c) * 2;
      CpAsync16(ks + dst, k_base + off, valid);
      CpAsync16(vs + dst, v_base + off, valid);
      if (p.ring) {
        idx += kRowStep;
        while (idx >= p.capacity) idx -= p.capacity;
      }
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < b.num_tiles) load_kv(s, s);
    CpAsyncCommit();
  }

  // Positions of this thread's two rows (lane / 4 and lane / 4 + 8 of the warp).
  int row_pos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = wm * 16 + (lane >> 2) + h * 8;
    row_pos[h] = min(b.pos_first + r / p.heads_per_block, b.pos_last);
  }

  float o[kDW / 8][4];
#pragma unroll
  for (int n = 0; n < kDW / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

  constexpr int kQFrags = S::kQInRegs ? kDW / 16 : 1;
  uint32_t q_frag[kQFrags][4];
  auto load_q_frag = [&](int ks, uint32_t(&a)[4]) {
    const int r = wm * 16 + (lane & 15);
    const int c = (wd * kDW + ks * 16) / 8 + (lane >> 4);
    LdMatrixX4(SmemAddr(q_s + TileOffset<D>(r, c)), a);
  };

  for (int tile = 0; tile < b.num_tiles; ++tile) {
    const int stage = tile % STAGES;
    CpAsyncWait<STAGES - 2>();
    __syncthreads();  // tile visible to all; stage (tile - 1) % STAGES is free
    if (tile + STAGES - 1 < b.num_tiles) load_kv(tile + STAGES - 1, (tile + STAGES - 1) % STAGES);
    CpAsyncCommit();
    if constexpr (S::kQInRegs) {
      if (tile == 0) {
#pragma unroll
        for (int ks = 0; ks < kDW / 16; ++ks) load_q_frag(ks, q_frag[ks]);
      }
    }
    const __nv_bfloat16* ks_s = k_s + stage * BN * D;
    const __nv_bfloat16* vs_s = v_s + stage * BN * D;
    const int u0 = b.tile_lo + tile * BN;

    // Keys outside [valid_lo, valid_hi) were read only in length-unaware mode
    // and may hold anything (NaN): their V rows must be zero, since 0 * NaN
    // would poison the P V product.
    if (!p.length_aware && (u0 < b.valid_lo || u0 + BN > b.valid_hi)) {
      __nv_bfloat16* vz = v_s + stage * BN * D;
      for (int i = tid; i < BN * kChunks; i += S::kThreads) {
        const int r = i / kChunks, u = u0 + r;
        if (u < b.valid_lo || u >= b.valid_hi)
          *reinterpret_cast<uint4*>(vz + TileOffset<D>(r, i % kChunks)) = make_uint4(0, 0, 0, 0);
      }
      __syncthreads();
    }

    // S = Q K^T over this warp's head_dim columns.
    float s[BN / 8][4];
#pragma unroll
    for (int n = 0; n < BN / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kDW / 16; ++ks) {
      uint32_t a_tmp[4];
      if constexpr (!S::kQInRegs) load_q_frag(ks, a_tmp);
      const uint32_t(&a)[4] = S::kQInRegs ? q_frag[S::kQInRegs ? ks : 0] : a_tmp;
#pragma unroll
      for (int n2 = 0; n2 < BN / 16; ++n2) {
        uint32_t bk[4];
        const int r = n2 * 16 + (lane & 7) + ((lane >> 4) << 3);
        const int c = (wd * kDW + ks * 16) / 8 + ((lane >> 3) & 1);
        LdMatrixX4(SmemAddr(ks_s + TileOffset<D>(r, c)), bk);
        Mma16816(s[2 * n2], a, bk[0], bk[1]);
        Mma16816(s[2 * n2 + 1], a, bk[2], bk[3]);
      }
    }
    if constexpr (WD > 1) {
#pragma unroll
      for (int n = 0; n < BN / 8; ++n)
        red_s[((wd * WM + wm) * (BN / 8) + n) * 32 + lane] =
            make_float4(s[n][0], s[n][1], s[n][2], s[n][3]);
      __syncthreads();
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        float4 t = red_s[(wm * (BN / 8) + n) * 32 + lane];
#pragma unroll
        for (int w = 1; w < WD; ++w) {
          const float4 x = red_s[((w * WM + wm) * (BN / 8) + n) * 32 + lane];
          t.x += x.x, t.y += x.y, t.z += x.z, t.w += x.w;
        }
        s[n][0] = t.x, s[n][1] = t.y, s[n][2] = t.z, s[n][3] = t.w;
      }
    }

    // Mask (only tiles that cross a boundary), scale into log2 units.
    const bool full = u0 >= b.valid_lo && u0 + BN - 1 <= b.pos_first &&
                      (p.window == 0 || b.pos_last - u0 < p.window);
#pragma unroll
    for (int n = 0; n < BN / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[n][e] * p.scale_log2;
        if (!full) {
          const int u = u0 + n * 8 + ((lane & 3) << 1) + (e & 1);
          const int pos = row_pos[e >> 1];
          if (u < 0 || u > pos || (p.window > 0 && pos - u >= p.window)) x = -INFINITY;
        }
        s[n][e] = x;
      }
    }

    // Online softmax; rows are spread over the 4 lanes of a quad.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = row_max[h];
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base = mx == -INFINITY ? 0.f : mx;
      const float alpha = Exp2(row_max[h] - base);
      row_max[h] = mx;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        s[n][2 * h] = Exp2(s[n][2 * h] - base);
        s[n][2 * h + 1] = Exp2(s[n][2 * h + 1] - base);
        sum += s[n][2 * h] + s[n][2 * h + 1];
      }
      row_sum[h] = row_sum[h] * alpha + sum;
#pragma unroll
      for (int n = 0; n < kDW / 8; ++n) o[n][2 * h] *= alpha, o[n][2 * h + 1] *= alpha;
    }

    // O += P V over this warp's columns; P's accumulator layout is the A layout.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const uint32_t a[4] = {PackBf16(s[2 * kk][0], s[2 * kk][1]),
                             PackBf16(s[2 * kk][2], s[2 * kk][3]),
                             PackBf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             PackBf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int n2 = 0; n2 < kDW / 16; ++n2) {
        uint32_t bv[4];
        const int r = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        const int c = (wd * kDW + n2 * 16) / 8 + (lane >> 4);
        LdMatrixX4Trans(SmemAddr(vs_s + TileOffset<D>(r, c)), bv);
        Mma16816(o[2 * n2], a, bv[0], bv[1]);
        Mma16816(o[2 * n2 + 1], a, bv[2], bv[3]);
      }
    }
  }
  CpAsyncWait<0>();

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
  }

  const int rows_valid = min(p.tokens_per_block, b.num_tokens) * p.heads_per_block;
  if (p.num_splits == 1) {
    // Normalize, stage this warp's [16, kDW] piece in its own corner of q_s
    // (only this warp ever read it), then write 16-byte rows.
    if (b.num_tiles == 0) __syncthreads();  // q_s may still be loading
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float inv = row_sum[h] > 0.f ? 1.f / row_sum[h] : 0.f;
      const int r = wm * 16 + (lane >> 2) + h * 8;
#pragma unroll
      for (int n = 0; n < kDW / 8; ++n) {
        const int col = wd * kDW + n * 8 + ((lane & 3) << 1);
        *reinterpret_cast<uint32_t*>(q_s + TileOffset<D>(r, col / 8) + (col & 7)) =
            PackBf16(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
      }
    }
    __syncwarp();
    constexpr int kWarpChunks = kDW / 8;
    for (int i = lane; i < 16 * kWarpChunks; i += 32) {
      const int r = wm * 16 + i / kWarpChunks;
      const int c = wd * kWarpChunks + i % kWarpChunks;
      if (r >= rows_valid) continue;
      const int64_t row = (int64_t)(b.q_begin + b.token0 + r / p.heads_per_block) * p.num_heads +
                          b.head0 + r % p.heads_per_block;
      *reinterpret_cast<uint4*>(p.out + row * D + c * 8) =
          *reinterpret_cast<const uint4*>(q_s + TileOffset<D>(r, c));
    }
  } else {
    // Split-K partials: [seq][head][split] x (acc[D], max, sum, 2 pad), unnormalized.
    const int split = static_cast<int>(blockIdx.y) % p.num_splits;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wm * 16 + (lane >> 2) + h * 8;
      if (r >= rows_valid) continue;
      const int head = b.head0 + r % p.heads_per_block;
      float* part = p.partial +
                    ((int64_t)(b.seq * p.num_heads + head) * p.num_splits + split) * (D + 4);
#pragma unroll
      for (int n = 0; n < kDW / 8; ++n) {
        const int col = wd * kDW + n * 8 + ((lane & 3) << 1);
        *reinterpret_cast<float2*>(part + col) = make_float2(o[n][2 * h], o[n][2 * h + 1]);
      }
      if (wd == 0 && (lane & 3) == 0) {
        part[D] = row_max[h];
        part[D + 1] = row_sum[h];
      }
    }
  }
}

}  // namespace gemma::kernels::attention
