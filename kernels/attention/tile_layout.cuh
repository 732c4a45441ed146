// Internal: the attention tile kernel's shapes (TileShape, TileConfig), its
// shared-memory tile layouts, fragment conversions and per-block key range.
// tile_kernel.cuh describes the design.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/attention/kernel_params.h"
#include "kernels/common/mma.cuh"

namespace gemma::kernels::attention {

// KVB: bytes per cached K / V element (2: bf16, 1: E4M3). KD: head_dim
// columns a K stage holds (D; the keys-from-values builds hold only the
// rotated ones, TileConfig::kKeyDims).
template <int D, int WM, int WD, int BN, int STAGES, int MR = 1, int PX = 0, int KVB = 2, int KD = D>
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
  static constexpr int kKvStageBytes = BN * D * KVB;  // a V stage (and a K stage, KD = D)
  static constexpr int kKStageBytes = BN * KD * KVB;
  // WD > 1: the WD partial S tiles; with PX also WD x kBM floats of row maxima
  // (then row sums), and the bf16 P tile reuses the partials' space.
  static constexpr int kRedBytes = WD > 1 ? WD * kBM * BN * 4 + (PX != 0 ? WD * kBM * 4 : 0) : 0;
  static constexpr int kSmemBytes = kQBytes + STAGES * (kKStageBytes + kKvStageBytes) + kRedBytes;
  // n8 tiles of S whose softmax a warp computes: all, or (PX) its 1 / WD share.
  static constexpr int kOwnTiles = PX ? BN / 8 / WD : BN / 8;
  static_assert(kDW % 16 == 0 && BN % 16 == 0 && STAGES >= 2, "bad tile");
  static_assert(!PX || (WD > 1 && (BN / 8) % WD == 0), "PX splits S's n8 tiles over WD warps");
};

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

// An 8x8 matrix of 16-bit values held as MMA fragments (lane g * 4 + t: row
// g, columns 2t and 2t + 1), transposed across the warp.
__device__ __forceinline__ uint32_t Movmatrix8x8Trans(uint32_t v) {
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(r) : "r"(v));
  return r;
}

// The largest GQA group a keys-from-values build serves. The tile build's
// m16 tile holds the group's heads in rows 0-7 and the second bf16 terms of
// kv_weight * Q in rows 8-15 (tile_kernel.cuh); the key-rows build's MMA
// has the group's heads as its n8 columns (decode_key_rows.cuh).
inline constexpr int kKeysFromValuesMaxGroup = 8;

// Two bf16 values (packed, dims d and d + 1) times w[0], w[1] as two bf16
// terms: the rounded products (in place) and what the rounding left out
// (returned), so their sum keeps the fp32 products (keys from values).
__device__ __forceinline__ uint32_t WeightBf16x2Exact(uint32_t& v, const float* w) {
  const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  const float2 y = make_float2(x.x * __ldg(w), x.y * __ldg(w + 1));
  v = PackBf16(y.x, y.y);
  const float2 h = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  return PackBf16(y.x - h.x, y.y - h.y);
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

// One instantiation's parameters and what follows from them; F8 and PAD as
// AttentionTileKernel describes. The cache dtype's differences that are
// only sizes and layouts live here; the fragment code of the two dtypes is
// separate (tile_stages.cuh).
// KFV: keys from values (KernelParams::kv_weight; whole head_dim rows).
template <int D_, int WM_, int WD_, int BN_, int STAGES_, int MR_, int PX_, bool F8_, bool PAD_, bool KFV_ = false>
struct TileConfig {
  static constexpr int D = D_, WM = WM_, WD = WD_, BN = BN_, STAGES = STAGES_, MR = MR_, PX = PX_;
  static constexpr bool F8 = F8_, PAD = PAD_, KFV = KFV_;
  // KFV: a K stage holds the rotated dims only, D / 8 pairs at most, the
  // first half's in columns [0, kKeyDims / 2), the second's above.
  static constexpr int kKeyDims = KFV ? D / 4 : D;
  using S = TileShape<D, WM, WD, BN, STAGES, MR, PX, F8 ? 1 : 2, kKeyDims>;
  static constexpr int kBM = S::kBM, kDW = S::kDW, kWR = S::kWarpRows, kThreads = S::kThreads;
  static constexpr int kNT = BN / 8;  // n8 tiles of S
  static constexpr int kOwn = S::kOwnTiles;
  static constexpr int kQFrags = S::kQInRegs ? kDW / 16 : 1;
  // K / V stages: 16-byte chunks of 8 bf16 or 16 E4M3 elements; a loader
  // pass of all threads covers kKvRowStep whole rows.
  static constexpr int kChunkElems = F8 ? 16 : 8;
  static constexpr int kKvChunks = D / kChunkElems;
  static constexpr int kKvRowStep = kThreads / kKvChunks;
  static_assert(kThreads % kKvChunks == 0, "a pass must cover whole rows");
  static_assert(!F8 || (PX == 0 && BN % 32 == 0 && kDW % 32 == 0), "E4M3 fragments: 32 keys / dims per ldmatrix");
  static_assert(!KFV || (!PAD && !F8 && kKeyDims % 16 == 0), "keys from values: bf16, whole head_dim rows");
  // KFV: the K stage column of rotated 8-dim chunk c.
  static __device__ __forceinline__ int KeyChunk(int c) {
    return c < D / 16 ? c : c - D / 16 + kKeyDims / 16;
  }

  // KFV: whether dim d is one RoPE rotates (K's own value is read there).
  static __device__ __forceinline__ bool Rotated(int d, int rope_pairs) {
    return d < rope_pairs || (d >= D / 2 && d < D / 2 + rope_pairs);
  }

  // Byte offset of chunk c of row r in a K / V stage (RawOffset layout for
  // E4M3 tiles, TileOffset for bf16).
  static __device__ __forceinline__ int KvChunkOffset(int r, int c) {
    if constexpr (F8) return RawOffset<D>(r, 16 * c);
    else return 2 * TileOffset<D>(r, c);
  }
  // P as the PV MMA's A operand: f16 over an E4M3 cache (f16 MMAs), else bf16.
  static __device__ __forceinline__ uint32_t PackP(float lo, float hi) {
    if constexpr (F8) return PackF16(lo, hi);
    else return PackBf16(lo, hi);
  }
};

}  // namespace gemma::kernels::attention
