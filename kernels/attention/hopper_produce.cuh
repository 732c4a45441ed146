// The producer warpgroup of the Hopper prefill kernel (hopper_prefill.cuh):
// the kernel's shape, the swizzled tile layout, and the two producers that
// fill a stage's K and V tiles: cp.async from a bf16 cache, and, over an
// E4M3 cache, cp.async of the codes into staging then an exact widening to
// f16 in shared memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/kernel_params.h"
#include "kernels/attention/tile_layout.cuh"
#include "kernels/common/smem_copy.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma_bf16.cuh"

namespace gemma::kernels::attention {

// QR: k16 steps of the warpgroup's Q (of 16) held in registers as wgmma A
// fragments (read from shared memory once) instead of re-read from shared
// memory for every key tile: shared-memory bandwidth, not the tensor cores,
// bounds the 64-row D = 512 block (per tile: Q 64 KB, K 32 KB, V 32 KB, S
// exchange 32 KB, cp.async fill 64 KB).
template <int D_, int BN_, int STAGES_, int QR_ = 0, bool F8_ = false>
struct HopperShape {
  static constexpr int D = D_, BN = BN_, STAGES = STAGES_, QR = QR_;
  static constexpr bool F8 = F8_;  // E4M3 cache (HopperProduceE4m3)
  static constexpr int kWD = D / 256;  // warpgroups splitting head_dim
  static constexpr int kBM = 64 * (2 / kWD);
  static constexpr int kThreads = 384;
  static constexpr int kSubBytes = 128;  // one swizzled row of a 64-column sub-tile
  static constexpr int kQBytes = kBM * D * 2;
  static constexpr int kKvBytes = BN * D * 2;  // one K or V tile
  // [parity][warpgroup][BN / 8 float4][128 threads]
  static constexpr int kXchBytes = kWD > 1 ? 2 * 2 * (BN / 8) * 128 * 16 : 0;
  static constexpr int kSmemBytes = kQBytes + 2 * STAGES * kKvBytes + kXchBytes + kSwizzleAtom;  // + alignment
  static_assert(D == 256 || D == 512, "a consumer warpgroup owns 256 columns");
  static_assert(BN == 32 || BN == 64, "S tile widths with a wgmma wrapper");
  static_assert(QR >= 0 && QR <= 16, "the warpgroup's Q is 16 k16 steps");
  // E4M3 staging (one tile of K codes, one of V, BN x D bytes each) in the Q
  // sub-tiles whose k16 steps the consumers hold in registers (QR >= 8: the
  // first two 64-column sub-tiles of each warpgroup's Q columns).
  static constexpr int kStageCodes = BN * D;
  static constexpr int kStagingV = kWD > 1 ? 4 * kBM * kSubBytes : kStageCodes;
  static_assert(!F8 || QR >= 8, "E4M3 staging lives in the Q sub-tiles held in registers");
  static_assert(!F8 || (kWD > 1 ? kStageCodes <= 2 * kBM * kSubBytes : 2 * kStageCodes <= 2 * kBM * kSubBytes),
                "E4M3 staging larger than the freed Q sub-tiles");
};

// 16-byte chunk `c` (of D / 8) of row `r` in a [D/64][rows][128 B] tile.
template <int kRows>
__device__ __forceinline__ uint32_t SwizzledChunk(int r, int c) {
  return static_cast<uint32_t>((c >> 3) * (kRows * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// Where key `u`'s row of the block's KV head starts in the cache (in
// elements: bf16 values or E4M3 bytes), or -1: outside the keys that exist,
// or in a released block (its tile row is zero-filled). The slot, ring and
// paged addressing of the tile kernel.
__device__ __forceinline__ int64_t KeyOffset(const KernelParams& p, const BlockRange& b, const int* table, int u,
                                             int64_t pos_stride) {
  if (u < b.valid_lo || u >= b.valid_hi) return -1;
  int64_t idx;
  if (table != nullptr) {
    const int blk = __ldg(table + (u >> p.block_shift));
    if (blk < 0) return -1;
    idx = (static_cast<int64_t>(blk) << p.block_shift) + (u & ((1 << p.block_shift) - 1));
  } else {
    idx = p.ring ? u % p.capacity : u;
  }
  return idx * pos_stride;
}

template <class H>
__device__ __forceinline__ void HopperProduce(const KernelParams& p, const BlockRange& b, uint32_t kv_smem,
                                              uint64_t* full_bar, uint64_t* empty_bar, int pw, int lane) {
  constexpr int D = H::D, BN = H::BN, STAGES = H::STAGES;
  constexpr int kRowSlots = (BN + 31) / 32;
  const int64_t pos_stride = static_cast<int64_t>(p.num_kv_heads) * D;
  const int64_t head_off = (static_cast<int64_t>(b.slot) * p.capacity * p.num_kv_heads + b.kv_head) * D;
  const __nv_bfloat16* kg = p.k + head_off;
  const __nv_bfloat16* vg = p.v + head_off;
  const int* table = p.block_tables ? p.block_tables + p.table_offsets[b.seq] : nullptr;
  for (int tile = 0; tile < b.num_tiles; ++tile) {
    const int s = tile % STAGES;
    if (tile >= STAGES) MbarWait(SmemAddr(&empty_bar[s]), ((tile / STAGES) - 1) & 1);
    const int u0 = b.tile_lo + tile * BN;
    // Lane l finds the cache rows of keys l, l + 32, ...; -1: zero-fill.
    int64_t off[kRowSlots];
#pragma unroll
    for (int j = 0; j < kRowSlots; ++j)
      off[j] = lane + 32 * j < BN ? KeyOffset(p, b, table, u0 + lane + 32 * j, pos_stride) : -1;
    const uint32_t ks = kv_smem + static_cast<uint32_t>(s * 2 * H::kKvBytes), vs = ks + H::kKvBytes;
#pragma unroll
    for (int r = pw; r < BN; r += 4) {
      const int64_t o = __shfl_sync(0xffffffffu, off[r / 32], r % 32);
      const bool valid = o >= 0;
      const int64_t src = valid ? o : 0;
#pragma unroll
      for (int c = lane; c < D / 8; c += 32) {
        const uint32_t dst = SwizzledChunk<BN>(r, c);
        CpAsync16(ks + dst, kg + src + c * 8, valid);
        CpAsync16(vs + dst, vg + src + c * 8, valid);
      }
    }
    CpAsyncMbarArrive(SmemAddr(&full_bar[s]));
  }
  CpAsyncCommit();
  CpAsyncWait<0>();  // nothing in flight when the warp exits
}

// Eight E4M3 codes (two words, the lowest byte first) as eight f16 values,
// exactly (every E4M3 value, subnormals included, is an f16 value): one
// cvt.rn.f16x2.e4m3x2 per two codes.
__device__ __forceinline__ void E4m3x8ToF16(uint32_t w0, uint32_t w1, uint32_t (&out)[4]) {
  out[0] = E4m3x2ToF16x2(w0);
  out[1] = E4m3x2ToF16x2(w0 >> 16);
  out[2] = E4m3x2ToF16x2(w1);
  out[3] = E4m3x2ToF16x2(w1 >> 16);
}

__device__ __forceinline__ void LdShared128(uint32_t addr, uint32_t (&v)[4]) {
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(addr));
}
__device__ __forceinline__ void StShared128(uint32_t addr, const uint32_t (&v)[4]) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(addr), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
               : "memory");
}

// The named barrier of the E4M3 build (1-3 are the consumers'): the
// consumers have read the Q sub-tiles that become staging.
constexpr int kQFreedBarrier = 4;

// The producer over an E4M3 cache: codes widened to f16. Staging holds one tile of K codes and one
// of V ([BN][D] bytes each; 16-byte chunk c of key r at chunk c ^ (r % 8)).
// Each producer thread owns the same chunks of every tile (lane l of a warp:
// key r0 + l % 8, chunk c0 + l / 8, so that its 32 lanes cover eight keys
// and both the staging reads and the swizzled f16 writes spread over all
// banks): it copies them in with cp.async and widens them itself, so no
// producer waits for another. K of tile t + 1 loads while V of tile t is
// widened, and V of t + 1 while the stage waits for the consumers.
template <class H>
__device__ __forceinline__ void HopperProduceE4m3(const KernelParams& p, const BlockRange& b, uint32_t kv_smem,
                                                  uint32_t staging, uint64_t* full_bar, uint64_t* empty_bar, int pw,
                                                  int lane) {
  constexpr int D = H::D, BN = H::BN, STAGES = H::STAGES;
  constexpr int kChunks = D / 16;                    // 16-byte chunks of one key's codes
  constexpr int kUnits = (BN / 8) * (kChunks / 4);  // 32-chunk units of a tile
  static_assert(kChunks >= 8 && kUnits % 4 == 0, "tile split");
  const int64_t pos_stride = static_cast<int64_t>(p.num_kv_heads) * D;  // bytes
  const int64_t head_off = (static_cast<int64_t>(b.slot) * p.capacity * p.num_kv_heads + b.kv_head) * D;
  const uint8_t* cache[2] = {reinterpret_cast<const uint8_t*>(p.k) + head_off,
                             reinterpret_cast<const uint8_t*>(p.v) + head_off};
  const int* table = p.block_tables ? p.block_tables + p.table_offsets[b.seq] : nullptr;
  const uint32_t codes_at[2] = {staging, staging + H::kStagingV};
  auto key = [&](int u) { return (u % (BN / 8)) * 8 + (lane & 7); };
  auto chunk = [&](int u) { return (u / (BN / 8)) * 4 + (lane >> 3); };
  // Several units at a time, so that their table reads, copies and shared
  // loads overlap: four, or two at D = 256 (four spill there: the producers
  // have 40 registers).
  constexpr int kGroup = D >= 512 ? 4 : 2, kPerThread = kUnits / 4;
  static_assert(kPerThread % kGroup == 0, "units per thread");
  auto issue = [&](int tile, int kv) {  // this thread's chunks of tile's K (0) or V (1) into staging
#pragma unroll 1
    for (int g = 0; g < kPerThread; g += kGroup) {
      int64_t o[kGroup];
#pragma unroll
      for (int i = 0; i < kGroup; ++i)
        o[i] = KeyOffset(p, b, table, b.tile_lo + tile * BN + key(pw + 4 * (g + i)), pos_stride);
#pragma unroll
      for (int i = 0; i < kGroup; ++i) {
        const int u = pw + 4 * (g + i), r = key(u), c = chunk(u);
        CpAsync16(codes_at[kv] + static_cast<uint32_t>(r * D + ((c ^ (r & 7)) << 4)),
                  cache[kv] + (o[i] >= 0 ? o[i] : 0) + c * 16, o[i] >= 0);
      }
    }
    CpAsyncCommit();
  };
  auto widen = [&](uint32_t tile_smem, int kv) {  // staging -> f16 tile
#pragma unroll 1
    for (int g = 0; g < kPerThread; g += kGroup) {
      uint32_t codes[kGroup][4];
#pragma unroll
      for (int i = 0; i < kGroup; ++i) {
        const int u = pw + 4 * (g + i), r = key(u), c = chunk(u);
        LdShared128(codes_at[kv] + static_cast<uint32_t>(r * D + ((c ^ (r & 7)) << 4)), codes[i]);
      }
#pragma unroll
      for (int i = 0; i < kGroup; ++i) {
        const int u = pw + 4 * (g + i), r = key(u), c = chunk(u);
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // codes 0-7, then 8-15
          uint32_t out[4];
          E4m3x8ToF16(codes[i][2 * half], codes[i][2 * half + 1], out);
          StShared128(tile_smem + SwizzledChunk<BN>(r, 2 * c + half), out);
        }
      }
    }
  };
  NamedBarrierSync(kQFreedBarrier, H::kThreads);
  if (b.num_tiles > 0) {
    issue(0, 0);
    issue(0, 1);
  }
  for (int tile = 0; tile < b.num_tiles; ++tile) {
    const int s = tile % STAGES;
    const bool next = tile + 1 < b.num_tiles;
    const uint32_t ks = kv_smem + static_cast<uint32_t>(s * 2 * H::kKvBytes), vs = ks + H::kKvBytes;
    if (tile >= STAGES) MbarWait(SmemAddr(&empty_bar[s]), ((tile / STAGES) - 1) & 1);
    CpAsyncWait<1>();  // K of this tile (V still in flight)
    widen(ks, 0);
    if (next) issue(tile + 1, 0);
    if (next) {
      CpAsyncWait<1>();  // V of this tile (K of the next in flight)
    } else {
      CpAsyncWait<0>();
    }
    widen(vs, 1);
    if (next) issue(tile + 1, 1);
    FenceProxyAsyncShared();  // the f16 tiles are read by wgmma (async proxy)
    MbarArrive(SmemAddr(&full_bar[s]));
  }
  CpAsyncWait<0>();  // nothing in flight when the warp exits
}

}  // namespace gemma::kernels::attention
