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
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/kernel_params.h"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"

namespace gemma::kernels::attention {

// KVB: bytes per cached K / V element (2: bf16, 1: E4M3).
template <int D, int WM, int WD, int BN, int STAGES, int MR = 1, int PX = 0, int KVB = 2>
struct TileShape {
  static constexpr int kWarps = WM * WD;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpRows = 16 * MR;       // MR m16 row tiles per warp
  static constexpr int kBM = kWarpRows * WM;
  static constexpr int kDW = D / WD;              // head_dim columns per warp
  static constexpr int kChunks = D / 8;           // 16-byte chunks per row
  static constexpr int kSwizzle = (kChunks < 8 ? kChunks : 8) - 1;
  static constexpr int kAccFloats = MR * kDW / 2; // per thread
  static constexpr int kSFloats = MR * BN / 2;    // per thread
  // Q fragments stay in registers when they fit next to the accumulator.
  static constexpr bool kQInRegs = MR * kDW / 4 + kAccFloats <= 128;
  static constexpr int kQBytes = kBM * D * 2;
  static constexpr int kKvStageBytes = BN * D * KVB;
  // WD > 1: the WD partial S tiles; with PX also WD x kBM floats of row maxima
  // (then row sums), and the bf16 P tile reuses the partials' space.
  static constexpr int kRedBytes = WD > 1 ? WD * kBM * BN * 4 + (PX != 0 ? WD * kBM * 4 : 0) : 0;
  static constexpr int kSmemBytes = kQBytes + 2 * STAGES * kKvStageBytes + kRedBytes;
  // n8 tiles of S whose softmax a warp computes: all, or (PX) its 1 / WD share.
  static constexpr int kOwnTiles = PX ? BN / 8 / WD : BN / 8;
  static_assert(kDW % 16 == 0 && BN % 16 == 0 && STAGES >= 2, "bad tile");
  static_assert(!PX || (WD > 1 && (BN / 8) % WD == 0), "PX splits S's n8 tiles over WD warps");
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

// c += a (16x16, row) * b (16x8, col); bf16 in, fp32 accumulate (the bf16
// cache's path; the E4M3 one calls MmaF16).
__device__ __forceinline__ void Mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  MmaBf16(c, a[0], a[1], a[2], a[3], b0, b1);
}

__device__ __forceinline__ float Exp2(float x) {  // ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two E4M3 values (the low byte first) as a packed f16 pair, exactly (one
// cvt.rn.f16x2.e4m3x2 on sm_89 and later).
__device__ __forceinline__ uint32_t E4m3x2ToF16x2(uint32_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
  uint32_t r;
  memcpy(&r, &h, 4);
  return r;
}

// A bf16 pair as an f16 pair (exact for |x| in [2^-17, 65504], subnormal
// below: queries are RMS-normalized, so far inside).
__device__ __forceinline__ uint32_t Bf16x2ToF16x2(uint32_t v) {
  const __half2 h = __float22half2_rn(__bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v)));
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint32_t PackF16(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Two bf16 values (packed) times c, rounded to bf16.
__device__ __forceinline__ uint32_t ScaleBf16x2(uint32_t v, __nv_bfloat162 c) {
  __nv_bfloat162 x = __hmul2(*reinterpret_cast<__nv_bfloat162*>(&v), c);
  return *reinterpret_cast<uint32_t*>(&x);
}

// Element offset of (row, 16-byte chunk) in a [rows][D] bf16 tile; the XOR
// swizzle keeps ldmatrix's 8 row reads of one column conflict-free.
template <int D>
__device__ __forceinline__ int TileOffset(int row, int chunk) {
  constexpr int kChunks = D / 8;
  constexpr int kSwizzle = (kChunks < 8 ? kChunks : 8) - 1;
  return row * D + ((chunk ^ (row & kSwizzle)) << 3);
}

// Byte offset of element (row, col) in a [rows][D] E4M3 tile: 16-byte chunks
// XOR-swizzled by row, so ldmatrix's 8 row reads of one chunk column hit
// distinct banks (D >= 128).
template <int D>
__device__ __forceinline__ int RawOffset(int row, int col) {
  constexpr int kChunks = D / 16;
  constexpr int kSwizzle = (kChunks < 8 ? kChunks : 8) - 1;
  return row * D + ((((col >> 4) ^ (row & kSwizzle)) << 4) | (col & 15));
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
template <int D, int WM, int WD, int BN, int STAGES, int MR = 1, int PX = 0, bool F8 = false, int MINB = 1>
__global__ void __launch_bounds__(TileShape<D, WM, WD, BN, STAGES, MR, PX>::kThreads, MINB)
    AttentionTileKernel(const __grid_constant__ KernelParams p) {
  using S = TileShape<D, WM, WD, BN, STAGES, MR, PX, F8 ? 1 : 2>;
  constexpr int kBM = S::kBM, kDW = S::kDW, kChunks = S::kChunks, kWR = S::kWarpRows;
  constexpr int kNT = BN / 8;            // n8 tiles of S
  constexpr int kOwn = S::kOwnTiles;
  static_assert(!F8 || (PX == 0 && BN % 32 == 0 && kDW % 32 == 0), "E4M3 fragments: 32 keys / dims per ldmatrix");
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem);
  // K stages, then V stages, then the reduction space (RawOffset layout for
  // E4M3 tiles, TileOffset for bf16).
  unsigned char* kv_s = smem + S::kQBytes;
  auto k_stage = [&](int stage) { return kv_s + stage * S::kKvStageBytes; };
  auto v_stage = [&](int stage) { return kv_s + (STAGES + stage) * S::kKvStageBytes; };
  float4* red_s = reinterpret_cast<float4*>(kv_s + 2 * STAGES * S::kKvStageBytes);
  float* max_s = reinterpret_cast<float*>(red_s) + WD * kBM * BN;  // PX: [kBM][WD]
  uint2* p_s = reinterpret_cast<uint2*>(red_s);                     // PX: bf16 P over red_s

  WaitForPreviousKernel();  // q and this step's K/V rows come from QKV-RoPE (PDL launch: decode)
  BlockRange b;
  if (!SetUpBlock<kBM, BN>(p, b)) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WM, wd = warp / WM;
  const int n_lo = PX ? wd * kOwn : 0;  // first n8 tile of S this warp finishes
  // PX: the WD per-warp values (row maxima, then row sums) of block row `row`.
  auto row_values = [&](int row, float(&v)[WD]) {
    if constexpr (WD % 4 == 0) {
#pragma unroll
      for (int q = 0; q < WD / 4; ++q) {
        const float4 t = reinterpret_cast<const float4*>(max_s + row * WD)[q];
        v[4 * q] = t.x, v[4 * q + 1] = t.y, v[4 * q + 2] = t.z, v[4 * q + 3] = t.w;
      }
    } else {
#pragma unroll
      for (int w = 0; w < WD; ++w) v[w] = max_s[row * WD + w];
    }
  };

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
  // E4M3: one byte per element, 16-byte chunks of 16 elements (thread t
  // copies chunk t % kRawChunks of rows t / kRawChunks + k * kRawRowStep).
  constexpr int kRawChunks = D / 16;
  static_assert(S::kThreads % kRawChunks == 0, "a raw pass must cover whole rows");
  constexpr int kRawRowStep = S::kThreads / kRawChunks;
  const int raw_c = tid % kRawChunks, raw_r0 = tid / kRawChunks;
  const int64_t raw_base = ((int64_t)b.slot * p.capacity * p.num_kv_heads + b.kv_head) * D + raw_c * 16;
  const uint8_t* k8_base = reinterpret_cast<const uint8_t*>(p.k) + raw_base;
  const uint8_t* v8_base = reinterpret_cast<const uint8_t*>(p.v) + raw_base;
  auto copy_row = [&](uint32_t ks, uint32_t vs, int r, int64_t off, bool valid) {
    if constexpr (F8) {
      const uint32_t dst = RawOffset<D>(r, raw_c * 16);
      CpAsync16(ks + dst, k8_base + off, valid);
      CpAsync16(vs + dst, v8_base + off, valid);
    } else {
      const uint32_t dst = TileOffset<D>(r, ld_c) * 2;
      CpAsync16(ks + dst, k_base + off, valid);
      CpAsync16(vs + dst, v_base + off, valid);
    }
  };
  const int row0 = F8 ? raw_r0 : ld_r0;
  constexpr int row_step = F8 ? kRawRowStep : kRowStep;
  const int* table = p.block_tables ? p.block_tables + p.table_offsets[b.seq] : nullptr;
  const int block_mask = (1 << p.block_shift) - 1;
  auto load_kv = [&](int tile, int stage) {
    const int u0 = b.tile_lo + tile * BN;
    const uint32_t ks = SmemAddr(k_stage(stage)), vs = SmemAddr(v_stage(stage));
    if (table != nullptr) {  // paged: one table lookup per row
#pragma unroll 4
      for (int r = row0; r < BN; r += row_step) {
        const int u = u0 + r;
        const bool valid = u >= b.valid_lo && u < b.valid_hi;
        const int64_t idx = valid ? ((int64_t)__ldg(table + (u >> p.block_shift)) << p.block_shift) + (u & block_mask) : 0;
        copy_row(ks, vs, r, idx * pos_stride, valid);
      }
      return;
    }
    int idx = p.ring ? ((u0 + row0) % p.capacity + p.capacity) % p.capacity : 0;
#pragma unroll 4
    for (int r = row0; r < BN; r += row_step) {
      const int u = u0 + r;
      bool valid;
      if (p.ring) {
        valid = u >= 0 && (!p.length_aware || (u >= b.valid_lo && u < b.valid_hi));
      } else {
        idx = u;
        valid = u >= 0 && u < p.capacity && (!p.length_aware || u < b.valid_hi);
      }
      const int64_t off = valid ? idx * pos_stride : 0;
      copy_row(ks, vs, r, off, valid);
      if (p.ring) {
        idx += row_step;
        while (idx >= p.capacity) idx -= p.capacity;
      }
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < b.num_tiles) load_kv(s, s);
    CpAsyncCommit();
  }

  // Row (within the block) of this thread's accumulator row h of m16 tile i:
  // lane / 4 and lane / 4 + 8 of the tile.
  auto acc_row = [&](int i, int h) { return wm * kWR + i * 16 + (lane >> 2) + h * 8; };
  int row_pos[MR][2];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      row_pos[i][h] = min(b.pos_first + acc_row(i, h) / p.heads_per_block, b.pos_last);

  float o[MR][kDW / 8][4];
  float row_max[MR][2], row_sum[MR][2];
#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int n = 0; n < kDW / 8; ++n) o[i][n][0] = o[i][n][1] = o[i][n][2] = o[i][n][3] = 0.f;
    row_max[i][0] = row_max[i][1] = -INFINITY;
    row_sum[i][0] = row_sum[i][1] = 0.f;
  }

  constexpr int kQFrags = S::kQInRegs ? kDW / 16 : 1;
  uint32_t q_frag[MR][kQFrags][4];
  auto load_q_frag = [&](int i, int ks, uint32_t(&a)[4]) {
    const int r = wm * kWR + i * 16 + (lane & 15);
    const int c = (wd * kDW + ks * 16) / 8 + (lane >> 4);
    LdMatrixX4(SmemAddr(q_s + TileOffset<D>(r, c)), a);
  };

  for (int tile = 0; tile < b.num_tiles; ++tile) {
    const int stage = tile % STAGES;
    CpAsyncWait<STAGES - 2>();
    __syncthreads();  // tile visible to all; stage (tile - 1) % STAGES is free
    if (tile + STAGES - 1 < b.num_tiles) load_kv(tile + STAGES - 1, (tile + STAGES - 1) % STAGES);
    CpAsyncCommit();
    if constexpr (F8) {
      if (tile == 0) {
        // Q to f16 in the permuted order: within every 16 dims, position k
        // holds dim 4 (k / 2) + k % 2 for k < 8, dim 4 ((k - 8) / 2) + 2 + k % 2
        // above (pairs (0,1) (4,5) (8,9) (12,13) | (2,3) (6,7) (10,11) (14,15)).
        for (int i = tid; i < kBM * D / 16; i += S::kThreads) {
          const int r = i / (D / 16), g = i % (D / 16);
          uint4* lo = reinterpret_cast<uint4*>(q_s + TileOffset<D>(r, 2 * g));
          uint4* hi = reinterpret_cast<uint4*>(q_s + TileOffset<D>(r, 2 * g + 1));
          const uint4 x = *lo, y = *hi;
          *lo = make_uint4(Bf16x2ToF16x2(x.x), Bf16x2ToF16x2(x.z), Bf16x2ToF16x2(y.x), Bf16x2ToF16x2(y.z));
          *hi = make_uint4(Bf16x2ToF16x2(x.y), Bf16x2ToF16x2(x.w), Bf16x2ToF16x2(y.y), Bf16x2ToF16x2(y.w));
        }
        __syncthreads();
      }
    }
    if constexpr (S::kQInRegs) {
      if (tile == 0) {
#pragma unroll
        for (int i = 0; i < MR; ++i)
#pragma unroll
          for (int ks = 0; ks < kDW / 16; ++ks) load_q_frag(i, ks, q_frag[i][ks]);
      }
    }
    const __nv_bfloat16* ks_s = reinterpret_cast<const __nv_bfloat16*>(k_stage(stage));
    const __nv_bfloat16* vs_s = reinterpret_cast<const __nv_bfloat16*>(v_stage(stage));
    const unsigned char* kr = k_stage(stage);  // F8: the raw tiles
    const unsigned char* vr = v_stage(stage);
    const int u0 = b.tile_lo + tile * BN;

    // Keys outside [valid_lo, valid_hi) were read only in length-unaware mode
    // and may hold anything (NaN): their V rows must be zero, since 0 * NaN
    // would poison the P V product.
    if (!p.length_aware && (u0 < b.valid_lo || u0 + BN > b.valid_hi)) {
      unsigned char* vz = v_stage(stage);
      constexpr int chunks = F8 ? kRawChunks : kChunks;
      for (int i = tid; i < BN * chunks; i += S::kThreads) {
        const int r = i / chunks, u = u0 + r;
        if (u >= b.valid_lo && u < b.valid_hi) continue;
        uint4* z = reinterpret_cast<uint4*>(vz + (F8 ? RawOffset<D>(r, 16 * (i % chunks)) : 2 * TileOffset<D>(r, i % chunks)));
        *z = make_uint4(0, 0, 0, 0);
      }
      __syncthreads();
    }

    // S = Q K^T over this warp's head_dim columns; each K fragment feeds the
    // warp's MR row tiles.
    float s[MR][kNT][4];
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int n = 0; n < kNT; ++n) s[i][n][0] = s[i][n][1] = s[i][n][2] = s[i][n][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kDW / 16; ++ks) {
      uint32_t a_tmp[MR][4];
      if constexpr (!S::kQInRegs) {
#pragma unroll
        for (int i = 0; i < MR; ++i) load_q_frag(i, ks, a_tmp[i]);
      }
      if constexpr (F8) {
        // One ldmatrix: 32 keys (register j: keys 8j..8j+7) x these 16 dims.
#pragma unroll
        for (int n4 = 0; n4 < BN / 32; ++n4) {
          uint32_t bk[4];
          LdMatrixX4(SmemAddr(kr + RawOffset<D>(n4 * 32 + lane, wd * kDW + ks * 16)), bk);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const uint32_t b0 = E4m3x2ToF16x2(bk[j]), b1 = E4m3x2ToF16x2(bk[j] >> 16);
#pragma unroll
            for (int i = 0; i < MR; ++i) {
              const uint32_t(&a)[4] = S::kQInRegs ? q_frag[i][S::kQInRegs ? ks : 0] : a_tmp[i];
              MmaF16(s[i][4 * n4 + j], a[0], a[1], a[2], a[3], b0, b1);
            }
          }
        }
      } else {
#pragma unroll
        for (int n2 = 0; n2 < BN / 16; ++n2) {
          uint32_t bk[4];
          const int r = n2 * 16 + (lane & 7) + ((lane >> 4) << 3);
          const int c = (wd * kDW + ks * 16) / 8 + ((lane >> 3) & 1);
          LdMatrixX4(SmemAddr(ks_s + TileOffset<D>(r, c)), bk);
#pragma unroll
          for (int i = 0; i < MR; ++i) {
            const uint32_t(&a)[4] = S::kQInRegs ? q_frag[i][S::kQInRegs ? ks : 0] : a_tmp[i];
            Mma16816(s[i][2 * n2], a, bk[0], bk[1]);
            Mma16816(s[i][2 * n2 + 1], a, bk[2], bk[3]);
          }
        }
      }
    }

    // The full S (summed over the WD column warps) for this warp's n8 tiles
    // [n_lo, n_lo + kOwn): all of them, or with PX its 1 / WD share.
    auto red_at = [&](int w, int i, int n) -> float4& {
      return red_s[(((w * WM + wm) * MR + i) * kNT + n) * 32 + lane];
    };
    float x[MR][kOwn][4];
    if constexpr (WD > 1) {
#pragma unroll
      for (int i = 0; i < MR; ++i)
#pragma unroll
        for (int n = 0; n < kNT; ++n)
          red_at(wd, i, n) = make_float4(s[i][n][0], s[i][n][1], s[i][n][2], s[i][n][3]);
      __syncthreads();
#pragma unroll
      for (int i = 0; i < MR; ++i) {
#pragma unroll
        for (int j = 0; j < kOwn; ++j) {
          // Summed in warp order 0..WD-1; without PX this warp's own partial
          // comes from its registers.
          float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
          for (int w = 0; w < WD; ++w) {
            float4 v;
            if (!PX && w == wd)
              v = make_float4(s[i][j][0], s[i][j][1], s[i][j][2], s[i][j][3]);
            else
              v = red_at(w, i, n_lo + j);
            if (w == 0)
              t = v;
            else
              t.x += v.x, t.y += v.y, t.z += v.z, t.w += v.w;
          }
          x[i][j][0] = t.x, x[i][j][1] = t.y, x[i][j][2] = t.z, x[i][j][3] = t.w;
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < MR; ++i)
#pragma unroll
        for (int j = 0; j < kOwn; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) x[i][j][e] = s[i][j][e];
    }

    // Mask (only tiles that cross a boundary), scale into log2 units.
    const bool full = u0 >= b.valid_lo && u0 + BN - 1 <= b.pos_first &&
                      (p.window == 0 || b.pos_last - u0 < p.window);
#pragma unroll
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int j = 0; j < kOwn; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float v = x[i][j][e] * p.scale_log2;
          if (!full) {
            const int u = u0 + (n_lo + j) * 8 + ((lane & 3) << 1) + (e & 1);
            const int pos = row_pos[i][e >> 1];
            if (u < 0 || u > pos || (p.window > 0 && pos - u >= p.window)) v = -INFINITY;
          }
          x[i][j][e] = v;
        }
      }
    }

    // Online softmax; rows are spread over the 4 lanes of a quad, and with PX
    // over the WD warps of a row group. PX == 1: the warps exchange their row
    // maxima, then exponentiate against the row's maximum and exchange P.
    // PX == 2: each warp exponentiates against its own maximum and publishes
    // it with P in one exchange; a reader scales each warp's P fragments by
    // 2^(its maximum - the row's maximum) (in bf16, so the row sums use the
    // same rounded factors).
    float mx[MR][2];  // this warp's row maxima (including the running one)
#pragma unroll
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float m = row_max[i][h];
#pragma unroll
        for (int j = 0; j < kOwn; ++j) m = fmaxf(m, fmaxf(x[i][j][2 * h], x[i][j][2 * h + 1]));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        mx[i][h] = m;
        if constexpr (PX != 0) {
          if ((lane & 3) == 0) max_s[acc_row(i, h) * WD + wd] = m;
        }
      }
    }
    // PX == 1: P (bf16) over the partial-S space: every warp read its partials
    // before the maxima barrier. PX == 2: there is no such barrier, so a
    // warp's P tiles go where only it read: the first 256 bytes of warp 0's
    // partial of the same tile.
    auto p_at = [&](int i, int n) -> uint2& {
      if constexpr (PX == 2)
        return reinterpret_cast<uint2*>(red_s + ((wm * MR + i) * kNT + n) * 32)[lane];
      else
        return p_s[((wm * MR + i) * kNT + n) * 32 + lane];
    };
    auto store_p = [&] {
#pragma unroll
      for (int i = 0; i < MR; ++i)
#pragma unroll
        for (int j = 0; j < kOwn; ++j)
          p_at(i, n_lo + j) = make_uint2(PackBf16(x[i][j][0], x[i][j][1]),
                                         PackBf16(x[i][j][2], x[i][j][3]));
    };
    float sum_own[MR][2];
    if constexpr (PX == 2) {
#pragma unroll
      for (int i = 0; i < MR; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float base = mx[i][h] == -INFINITY ? 0.f : mx[i][h];
          float sum = 0.f;
#pragma unroll
          for (int j = 0; j < kOwn; ++j) {
            x[i][j][2 * h] = Exp2(x[i][j][2 * h] - base);
            x[i][j][2 * h + 1] = Exp2(x[i][j][2 * h + 1] - base);
            sum += x[i][j][2 * h] + x[i][j][2 * h + 1];
          }
          sum_own[i][h] = sum;
        }
      }
      __syncwarp();  // all lanes have read the partials that P overwrites
      store_p();
    }
    if constexpr (PX != 0) __syncthreads();
    __nv_bfloat162 p_scale[MR][2][PX == 2 ? WD : 1];  // PX == 2: per source warp
#pragma unroll
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float m = mx[i][h];
        float v[WD];
        if constexpr (PX != 0) {
          row_values(acc_row(i, h), v);
#pragma unroll
          for (int w = 0; w < WD; ++w) m = fmaxf(m, v[w]);
        }
        const float base = m == -INFINITY ? 0.f : m;
        const float alpha = Exp2(row_max[i][h] - base);
        row_max[i][h] = m;
        if constexpr (PX == 2) {
#pragma unroll
          for (int w = 0; w < WD; ++w)
            p_scale[i][h][w] = __float2bfloat162_rn(v[w] == -INFINITY ? 0.f : Exp2(v[w] - base));
          const float own = mx[i][h] == -INFINITY
                                ? 0.f
                                : __bfloat162float(__float2bfloat16_rn(Exp2(mx[i][h] - base)));
          row_sum[i][h] = row_sum[i][h] * alpha + sum_own[i][h] * own;  // this warp's keys
        } else {
          // F8: P goes to the MMA as f16, which flushes below 2^-24: P is
          // taken 2^8 times larger (at most 256), so weights down to 2^-32 of
          // the row maximum still count, as they count in row_sum. O and
          // row_sum carry the same factor (it cancels in the normalization
          // and in the split merge, every split having it).
          const float p_base = F8 ? base - 8.f : base;
          float sum = 0.f;
#pragma unroll
          for (int j = 0; j < kOwn; ++j) {
            x[i][j][2 * h] = Exp2(x[i][j][2 * h] - p_base);
            x[i][j][2 * h + 1] = Exp2(x[i][j][2 * h + 1] - p_base);
            sum += x[i][j][2 * h] + x[i][j][2 * h + 1];
          }
          row_sum[i][h] = row_sum[i][h] * alpha + sum;  // PX == 1: this warp's keys
        }
#pragma unroll
        for (int n = 0; n < kDW / 8; ++n) o[i][n][2 * h] *= alpha, o[i][n][2 * h + 1] *= alpha;
      }
    }
    if constexpr (PX == 1) {
      store_p();
      __syncthreads();
    }

    // P as bf16 (F8: f16) A fragments (the accumulator layout is the A
    // layout): from registers, or with PX gathered from the row group's warps.
    auto p_frag = [&](int i, int kk, uint32_t(&a)[4]) {
      if constexpr (PX != 0) {
        const uint2 lo = p_at(i, 2 * kk), hi = p_at(i, 2 * kk + 1);
        a[0] = lo.x, a[1] = lo.y, a[2] = hi.x, a[3] = hi.y;
        if constexpr (PX == 2) {
          constexpr int kW = PX == 2 ? WD : 1;
          const int w0 = min(2 * kk / kOwn, kW - 1), w1 = min((2 * kk + 1) / kOwn, kW - 1);
          a[0] = ScaleBf16x2(a[0], p_scale[i][0][w0]);
          a[1] = ScaleBf16x2(a[1], p_scale[i][1][w0]);
          a[2] = ScaleBf16x2(a[2], p_scale[i][0][w1]);
          a[3] = ScaleBf16x2(a[3], p_scale[i][1][w1]);
        }
      } else {
        const int k0 = PX ? 0 : 2 * kk, k1 = PX ? 0 : 2 * kk + 1;  // compile-time indices
        auto pack = [](float lo, float hi) { return F8 ? PackF16(lo, hi) : PackBf16(lo, hi); };
        a[0] = pack(x[i][k0][0], x[i][k0][1]);
        a[1] = pack(x[i][k0][2], x[i][k0][3]);
        a[2] = pack(x[i][k1][0], x[i][k1][1]);
        a[3] = pack(x[i][k1][2], x[i][k1][3]);
      }
    };

    // O += P V over this warp's columns; each V fragment feeds MR row tiles.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[MR][4];
#pragma unroll
      for (int i = 0; i < MR; ++i) p_frag(i, kk, a[i]);
      if constexpr (F8) {
        // One ldmatrix.trans: registers 0, 1 keys +0 / +8 of 16-dim chunk
        // 2 n4, registers 2, 3 the same of chunk 2 n4 + 1; each pair gives
        // the even-dim (bytes 0, 2) and odd-dim (bytes 1, 3) n8 tiles.
#pragma unroll
        for (int n4 = 0; n4 < kDW / 32; ++n4) {
          uint32_t bv[4];
          const int m = lane >> 3;
          LdMatrixX4Trans(SmemAddr(vr + RawOffset<D>(kk * 16 + ((m & 1) << 3) + (lane & 7),
                                                     wd * kDW + n4 * 32 + ((m >> 1) << 4))),
                          bv);
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            const uint32_t x = __byte_perm(bv[t & ~1], bv[t | 1], (t & 1) ? 0x7531 : 0x6420);
            const uint32_t b0 = E4m3x2ToF16x2(x), b1 = E4m3x2ToF16x2(x >> 16);
#pragma unroll
            for (int i = 0; i < MR; ++i) MmaF16(o[i][4 * n4 + t], a[i][0], a[i][1], a[i][2], a[i][3], b0, b1);
          }
        }
      } else {
#pragma unroll
        for (int n2 = 0; n2 < kDW / 16; ++n2) {
          uint32_t bv[4];
          const int r = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
          const int c = (wd * kDW + n2 * 16) / 8 + (lane >> 4);
          LdMatrixX4Trans(SmemAddr(vs_s + TileOffset<D>(r, c)), bv);
#pragma unroll
          for (int i = 0; i < MR; ++i) {
            Mma16816(o[i][2 * n2], a[i], bv[0], bv[1]);
            Mma16816(o[i][2 * n2 + 1], a[i], bv[2], bv[3]);
          }
        }
      }
    }
  }
  CpAsyncWait<0>();

#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_sum[i][h] += __shfl_xor_sync(0xffffffffu, row_sum[i][h], 1);
      row_sum[i][h] += __shfl_xor_sync(0xffffffffu, row_sum[i][h], 2);
    }
  }
  if constexpr (PX != 0) {
    // Every warp summed only its keys. PX == 1: max_s is free (its last reads
    // came before the P barrier of the last tile, which every warp has
    // passed); PX == 2 reads it after that barrier.
    if constexpr (PX == 2) __syncthreads();
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if ((lane & 3) == 0) max_s[acc_row(i, h) * WD + wd] = row_sum[i][h];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v[WD];
        row_values(acc_row(i, h), v);
        float t = 0.f;
#pragma unroll
        for (int w = 0; w < WD; ++w) t += v[w];
        row_sum[i][h] = t;
      }
    }
  }

  AllowDependentLaunch();  // the split merge (or the output projection) may launch now
  const int rows_valid = min(p.tokens_per_block, b.num_tokens) * p.heads_per_block;
  if (p.num_splits == 1) {
    // Normalize, stage this warp's [kWR, kDW] piece in its own corner of q_s
    // (only this warp ever read it), then write 16-byte rows.
    if (b.num_tiles == 0) __syncthreads();  // q_s may still be loading
#pragma unroll
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float inv = row_sum[i][h] > 0.f ? 1.f / row_sum[i][h] : 0.f;
        const int r = acc_row(i, h);
        if constexpr (F8) {  // n8 tiles 2q (even dims) and 2q + 1 (odd) of chunk q: dims 16q + 4c .. + 3
#pragma unroll
          for (int q = 0; q < kDW / 16; ++q) {
            const int col = wd * kDW + q * 16 + ((lane & 3) << 2);
            *reinterpret_cast<uint2*>(q_s + TileOffset<D>(r, col / 8) + (col & 7)) =
                make_uint2(PackBf16(o[i][2 * q][2 * h] * inv, o[i][2 * q + 1][2 * h] * inv),
                           PackBf16(o[i][2 * q][2 * h + 1] * inv, o[i][2 * q + 1][2 * h + 1] * inv));
          }
        } else {
#pragma unroll
          for (int n = 0; n < kDW / 8; ++n) {
            const int col = wd * kDW + n * 8 + ((lane & 3) << 1);
            *reinterpret_cast<uint32_t*>(q_s + TileOffset<D>(r, col / 8) + (col & 7)) =
                PackBf16(o[i][n][2 * h] * inv, o[i][n][2 * h + 1] * inv);
          }
        }
      }
    }
    __syncwarp();
    constexpr int kWarpChunks = kDW / 8;
    for (int i = lane; i < kWR * kWarpChunks; i += 32) {
      const int r = wm * kWR + i / kWarpChunks;
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
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = acc_row(i, h);
        if (r >= rows_valid) continue;
        const int head = b.head0 + r % p.heads_per_block;
        float* part = p.partial +
                      ((int64_t)(b.seq * p.num_heads + head) * p.num_splits + split) * (D + 4);
        if constexpr (F8) {
#pragma unroll
          for (int q = 0; q < kDW / 16; ++q) {
            const int col = wd * kDW + q * 16 + ((lane & 3) << 2);
            *reinterpret_cast<float4*>(part + col) =
                make_float4(o[i][2 * q][2 * h], o[i][2 * q + 1][2 * h], o[i][2 * q][2 * h + 1], o[i][2 * q + 1][2 * h + 1]);
          }
        } else {
#pragma unroll
          for (int n = 0; n < kDW / 8; ++n) {
            const int col = wd * kDW + n * 8 + ((lane & 3) << 1);
            *reinterpret_cast<float2*>(part + col) = make_float2(o[i][n][2 * h], o[i][n][2 * h + 1]);
          }
        }
        if (wd == 0 && (lane & 3) == 0) {
          part[D] = row_max[i][h];
          part[D + 1] = row_sum[i][h];
        }
      }
    }
  }
}

}  // namespace gemma::kernels::attention
