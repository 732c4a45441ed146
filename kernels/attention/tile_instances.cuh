// Internal: builds the table of compiled tile configurations for one head_dim.
// Included by exactly one instances_d<D>.cu per head_dim, so each head_dim
// compiles in its own translation unit (parallel builds, no cross products).
#pragma once

#include <string>

#include "kernels/attention/kernel_params.h"
#include "kernels/attention/tile_kernel.cuh"

namespace gemma::kernels::attention {

inline constexpr int kMaxSmemBytes = 227 * 1024;  // Hopper opt-in limit per block

// Compile-time pruning of a candidate (WM row warps, WD column warps, BN, STAGES,
// MR m16 row tiles per warp, PX: P exchange, 0 none, 1 or 2 see tile_kernel.cuh):
//  - register budget: the fp32 accumulator is MR x D / (2 WD) registers per
//    thread (BLOCK_M x D <= 4096 x warps); at most 128 keeps it out of local memory;
//  - columns are split over warps only when a whole-D accumulator would exceed
//    64 registers (D > 128): below that, splitting only adds a reduction;
//  - the register file: threads x (accumulator + ~96 for fragments and
//    addresses) within 64K registers (16 warps at D = 512 spilled);
//  - shared memory: Q tile + STAGES x (K, V) tiles + the partial-S exchange.
template <int D, int WM, int WD, int BN, int STAGES, int MR = 1, int PX = 0>
constexpr bool Fits() {
  if (D % (16 * WD) != 0) return false;
  if (MR * D / WD / 2 > 128) return false;
  if (WD > 1 && D <= 128) return false;
  if (PX && (WD == 1 || (BN / 8) % WD != 0)) return false;
  const int bm = 16 * MR * WM;
  const int smem = bm * D * 2 + 2 * STAGES * BN * D * 2 +
                   (WD > 1 ? WD * bm * BN * 4 + (PX ? WD * bm * 4 : 0) : 0);
  return smem <= kMaxSmemBytes && 32 * WM * WD * (MR * D / WD / 2 + 96) <= 65536;
}

template <int D, int WM, int WD, int BN, int STAGES, int MR, int PX, bool F8, int MINB = 1, bool PAD = false,
          bool KFV = false>
void LaunchTile(const KernelParams& p, dim3 grid, cudaStream_t stream) {
  using S = typename TileConfig<D, WM, WD, BN, STAGES, MR, PX, F8, PAD, KFV>::S;
  constexpr auto kernel = AttentionTileKernel<D, WM, WD, BN, STAGES, MR, PX, F8, MINB, PAD, KFV>;
  if (p.pdl) {
    LaunchWithPdl(kernel, grid, dim3(S::kThreads), S::kSmemBytes, stream, p);
    return;
  }
  kernel<<<grid, S::kThreads, S::kSmemBytes, stream>>>(p);
}

template <int D, int WM, int WD, int BN, int STAGES, int MR, int PX, bool F8, int MINB = 1, bool PAD = false,
          bool KFV = false>
cudaError_t SetUpTile() {
  return cudaFuncSetAttribute(AttentionTileKernel<D, WM, WD, BN, STAGES, MR, PX, F8, MINB, PAD, KFV>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              TileConfig<D, WM, WD, BN, STAGES, MR, PX, F8, PAD, KFV>::S::kSmemBytes);
}

// Gives `e` an E4M3-cache build (launch_fp8) of this configuration; MINB:
// blocks per multiprocessor its registers must allow (launch bounds).
template <int D, int WM, int WD, int BN, int STAGES, int MR = 1, int PX = 0, int MINB = 1, bool PAD = false>
void AddFp8Build(KernelEntry& e) {
  e.setup_fp8 = &SetUpTile<D, WM, WD, BN, STAGES, MR, PX, true, MINB, PAD>;
  e.launch_fp8 = &LaunchTile<D, WM, WD, BN, STAGES, MR, PX, true, MINB, PAD>;
  e.fp8_blocks_per_sm = MINB;
}

// An entry's shape fields (S: the TileShape of the build they describe).
template <class S>
KernelEntry DescribeTile(int block_n, int stages, int d_split) {
  KernelEntry e;
  e.block_m = S::kBM;
  e.block_n = block_n;
  e.warps = S::kWarps;
  e.stages = stages;
  e.d_split = d_split;
  e.threads = S::kThreads;
  e.smem_bytes = S::kSmemBytes;
  return e;
}

// kFp8Too: also an E4M3-cache build of the same configuration; only the
// first two prefill lines have one (compile time) — both fit at head_dim
// 256, one elsewhere (D <= 128 has no D split; at 512 the 4-warp line
// exceeds the accumulator registers). Decode has its own (MakeTable).

// PAD: the build for head_dims below D (tile_kernel.cuh).
template <int D, int WM, int WD, int BN, int STAGES, int MR = 1, int PX = 0, bool kFp8Too = false,
          bool PAD = false>
KernelEntry MakeEntry() {
  using S = TileShape<D, WM, WD, BN, STAGES, MR, PX>;
  KernelEntry e = DescribeTile<S>(BN, STAGES, WD);
  e.name = "m" + std::to_string(S::kBM) + "n" + std::to_string(BN) + "w" +
           std::to_string(S::kWarps) + "s" + std::to_string(STAGES) + "d" + std::to_string(WD) +
           (MR > 1 ? "r" + std::to_string(MR) : "") + (PX == 1 ? "p" : PX == 2 ? "pl" : "") +
           (PAD ? "-pad" : "");
  e.setup = &SetUpTile<D, WM, WD, BN, STAGES, MR, PX, false, 1, PAD>;
  e.launch = &LaunchTile<D, WM, WD, BN, STAGES, MR, PX, false, 1, PAD>;
  if constexpr (kFp8Too) AddFp8Build<D, WM, WD, BN, STAGES, MR, PX>(e);
  return e;
}

template <int D, int WM, int WD, int BN, int STAGES, int MR = 1, int PX = 0, bool kFp8Too = false>
void AddIfFits(KernelTable& t) {
  if constexpr (Fits<D, WM, WD, BN, STAGES, MR, PX>())
    t.prefill.push_back(MakeEntry<D, WM, WD, BN, STAGES, MR, PX, kFp8Too>());
}

// Decode: one 16-row tile holds the heads of a KV group; warps split head_dim
// so the accumulator is 32 registers; pipelines 3-4 tiles deep keep enough
// bytes in flight for a memory-bound sweep (the E4M3 builds at D >= 256: 2
// deep, with more blocks per multiprocessor instead).
template <int D>
KernelTable MakeTable() {
  KernelTable t;
  // The first candidate that fits is the default.
  AddIfFits<D, 4, 2, 32, 2, 1, 0, true>(t);  // m64 n32, 8 warps, D split in 2 (+ E4M3 cache)
  AddIfFits<D, 4, 1, 64, 2, 1, 0, true>(t);  // m64 n64, 4 warps (+ E4M3 cache)
  AddIfFits<D, 4, 1, 32, 3>(t);   // m64 n32, 4 warps, 3 stages
  AddIfFits<D, 8, 1, 64, 2>(t);   // m128 n64, 8 warps
  AddIfFits<D, 4, 2, 64, 2>(t);   // m64 n64, 8 warps, D split in 2
  AddIfFits<D, 2, 4, 32, 2>(t);   // m32 n32, 8 warps, D split in 4
  AddIfFits<D, 4, 2, 16, 3>(t);   // m64 n16, 8 warps, 3 stages
  if constexpr (D >= 512) {
    // Each warp owns 32 rows (two m16 tiles) x D/4 columns, so every K or V
    // fragment read from shared memory feeds two MMAs: a 64-row block reads
    // its K/V tile twice (2 row groups) instead of 4 times, for the same 128
    // accumulator registers. With P exchange ("p") the 4 column warps
    // reduce-scatter the partial S (each finishes the softmax of BN / 4 keys)
    // and gather P in bf16 instead of each reading all partials. Shared-memory
    // bytes read per 64 x 32 tile (ldmatrix + exchange): default 352 KB, d4r2
    // 320 KB, d4r2p 276 KB. (P exchange on the default's shape would save
    // nothing: 364 KB with two more barriers.)
    AddIfFits<D, 2, 4, 32, 2, 2, 1>(t);  // m64 n32, 8 warps, 32 x D/4 each, P exchange
    AddIfFits<D, 2, 4, 32, 2, 2, 2>(t);  // same, local maxima (one barrier less)
    AddIfFits<D, 2, 4, 32, 2, 2, 0>(t);  // same, partial-S exchange only
  }
  t.default_prefill = 0;
  // 64 columns per warp: 8 warps at D = 512 keep enough loads and MMAs in
  // flight at one block per multiprocessor (4 reached only half of HBM).
  constexpr int kDecodeWd = D >= 128 ? D / 64 : 1;
  constexpr int kDecodeStages = D >= 256 ? 3 : 4;
  static_assert(TileShape<D, 1, kDecodeWd, 32, kDecodeStages>::kSmemBytes <= kMaxSmemBytes);
  t.decode = MakeEntry<D, 1, kDecodeWd, 32, kDecodeStages>();
  if constexpr (D >= 256) {
    // E4M3 cache: stages of half the bytes and two of them, so more blocks
    // share a multiprocessor — D = 256: four (48 KB each), D = 512: two
    // (96 KB) — with registers held to that share (128 per thread, no
    // spills): 16 warps per multiprocessor to cover the per-tile barriers
    // and loads. At batch 64 on the H200 this beat 3 stages x 1-3 blocks
    // (global 254 -> 196 us, sliding 195 -> 177 us per layer) and 64-key
    // tiles (211 us sliding).
    constexpr int kFp8Blocks = D == 256 ? 4 : 2;
    static_assert(kFp8Blocks * (TileShape<D, 1, kDecodeWd, 32, 2, 1, 0, 1>::kSmemBytes + 1024) <= 228 * 1024);
    AddFp8Build<D, 1, kDecodeWd, 32, 2, 1, 0, kFp8Blocks>(t.decode);
  } else {
    AddFp8Build<D, 1, kDecodeWd, 32, kDecodeStages>(t.decode);
  }
  // Head_dims between the previous instance and D: the decode shape again,
  // padded, for both cache dtypes (prefill runs it too, untuned: these
  // head_dims serve small test and research checkpoints, and two more builds
  // per head_dim keep the compile time down). The E4M3 build keeps one block
  // per multiprocessor's registers: held to 128, the padded D = 256 one
  // spilled.
  t.padded = MakeEntry<D, 1, kDecodeWd, 32, kDecodeStages, 1, 0, false, true>();
  AddFp8Build<D, 1, kDecodeWd, 32, kDecodeStages, 1, 0, 1, true>(t.padded);
  return t;
}

}  // namespace gemma::kernels::attention
