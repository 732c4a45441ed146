// Internal: the stages of the FP8 wgmma GEMV kernel (wgmma_fp8.cu's notes
// give the design): the work split over CTAs, the producer's TMA loop, the
// consumers' wgmma loop over one row tile's k-tiles, the cross-CTA fixup of
// split row tiles, and the epilogue. Included only by wgmma_fp8.cu.
#pragma once

#include <cuda.h>  // CUtensorMap only
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/pdl.cuh"
#include "kernels/common/smem_copy.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"
#include "kernels/gemv/wgmma_fp8.h"

namespace gemma::kernels::wgmma_fp8 {

inline constexpr int kTileK = 128;                          // k values (bytes) per k-tile = the 128-byte swizzle span
inline constexpr int kBoxBytes = kWgmmaFp8BoxRows * kTileK;  // one weight box: 8 KiB

struct KernelArgs {
  const float* w_scale;
  const float* x_scale;
  __nv_bfloat16* out_bf16;
  float* out_f32;
  float* workspace;
  int* counters;
  int n, m, k_tiles, splits;
  // Stream-K (streamk != 0): the grid's `ctas` CTAs split the `units` =
  // row tiles x k_tiles work units into contiguous, equal ranges; else CTA
  // c is (row tile c / splits, K split c % splits).
  int streamk, ctas, units;
  float softcap;
};

// N tokens per wgmma, C consumer warpgroups of T 64-row tiles, S stages.
template <int N, int C, int T, int S>
struct Shape {
  static constexpr int kRows = 64 * C * T;            // weight rows per CTA
  static constexpr int kWBytes = kRows * kTileK;      // weight boxes of a stage
  static constexpr int kXBytes = N * kTileK;          // x box of a stage
  static constexpr int kStageBytes = kWBytes + kXBytes;
  static constexpr int kAcc = N / 2;                  // fp32 accumulators per thread per 64-row tile
  static constexpr int kConsumers = C * 128;
  static constexpr int kQuads = T * kAcc / 4;         // float4s of one thread's partial sums
  static_assert(kXBytes % kSwizzleAtom == 0 && kStageBytes % kSwizzleAtom == 0, "stages must stay 1024-aligned");
  static_assert(N % 16 == 0 && N >= 16 && N <= 256, "wgmma N");
  static_assert(kAcc % 4 == 0, "partials move as float4");
};

// The first work unit (row tile * k_tiles + k-tile) of CTA c; c = ctas gives
// the end. Contiguous ranges, non-empty while ctas <= units (the launcher's
// rule) and splits <= k_tiles.
__device__ __forceinline__ int RangeBegin(const KernelArgs& a, int c) {
  if (a.streamk) return static_cast<int>(static_cast<int64_t>(c) * a.units / a.ctas);
  return (c / a.splits) * a.k_tiles + static_cast<int>(static_cast<int64_t>(a.k_tiles) * (c % a.splits) / a.splits);
}

// The CTA whose range holds unit u (the inverse of RangeBegin).
__device__ __forceinline__ int CtaOfUnit(const KernelArgs& a, int u) {
  if (a.streamk) return static_cast<int>((static_cast<int64_t>(u + 1) * a.ctas - 1) / a.units);
  const int kt = u % a.k_tiles;
  return (u / a.k_tiles) * a.splits + static_cast<int>((static_cast<int64_t>(kt + 1) * a.splits - 1) / a.k_tiles);
}

// Workspace slot of CTA c's partial sums of row tile `tile`. A split CTA
// has one segment; a stream-K CTA at most two partial ones (the tail of its
// first tile, the head of its last; the tiles between are whole).
__device__ __forceinline__ int SlotOf(const KernelArgs& a, int c, int tile) {
  if (!a.streamk) return c;
  return 2 * c + (RangeBegin(a, c) / a.k_tiles == tile ? 0 : 1);
}

// Named barrier over the consumer warpgroups only (the producer warp never
// joins; id 0 is __syncthreads).
__device__ __forceinline__ void ConsumerBarrier(int threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

// Stage s: full[s] waits for the producer's arrival and the TMA bytes,
// empty[s] for lane 0 of each of the 4C consumer warps.
template <int C, int S>
__device__ __forceinline__ void InitBarriers(uint64_t (&full_bar)[S], uint64_t (&empty_bar)[S]) {
  for (int s = 0; s < S; ++s) {
    MbarInit(SmemAddr(&full_bar[s]), 1);
    MbarInit(SmemAddr(&empty_bar[s]), 4 * C);
  }
  // Make the initialized barriers visible to the async proxy (TMA).
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Lane 0 of the producer warp: streams units [u_begin, u_end) through the
// ring (unit i of this CTA through stage i % S).
template <int N, int C, int T, int S>
__device__ __forceinline__ void Produce(const CUtensorMap& wmap, const CUtensorMap& xmap, const KernelArgs& a,
                                        uint32_t ring, uint64_t (&full_bar)[S], uint64_t (&empty_bar)[S],
                                        int u_begin, int u_end) {
  using L = Shape<N, C, T, S>;
  const int nk = a.k_tiles;
  PrefetchTensorMap(&wmap);
  PrefetchTensorMap(&xmap);
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  // Weight boxes that start past row n are not loaded: their accumulator
  // rows (computed from whatever the stage held) are never stored, and no
  // TMA box is ever entirely out of bounds. Partly out-of-bounds boxes (rows
  // or k) are zero-filled and count in full.
  auto load_weights = [&](int i) {
    const int u = u_begin + i, row0 = (u / nk) * L::kRows, kt = u % nk;
    const int boxes = min(C * T, (a.n - row0 + kWgmmaFp8BoxRows - 1) / kWgmmaFp8BoxRows);
    const uint32_t stage = ring + static_cast<uint32_t>((i % S) * L::kStageBytes);
    const uint32_t bar = SmemAddr(&full_bar[i % S]);
    MbarArriveExpectTx(bar, static_cast<uint32_t>(boxes * kBoxBytes + L::kXBytes));  // weights and x
#pragma unroll
    for (int b = 0; b < C * T; ++b) {
      if (b < boxes) TmaLoad2dHint(stage + b * kBoxBytes, &wmap, kt * kTileK, row0 + b * kWgmmaFp8BoxRows, bar, policy);
    }
  };
  auto load_x = [&](int i) {
    const uint32_t stage = ring + static_cast<uint32_t>((i % S) * L::kStageBytes);
    TmaLoad2d(stage + L::kWBytes, &xmap, ((u_begin + i) % nk) * kTileK, 0, SmemAddr(&full_bar[i % S]));
  };
  const int count = u_end - u_begin;
  const int pre = min(count, S);
  // Weights are constants: stream the first stages while the previous
  // kernel may still run.
  for (int i = 0; i < pre; ++i) load_weights(i);
  WaitForPreviousKernel();
  AllowDependentLaunch();
  for (int i = 0; i < pre; ++i) load_x(i);
  for (int i = pre; i < count; ++i) {
    // Use r = i / S >= 1 of stage i % S: wait for the consumers' release
    // of use r - 1 (the empty barrier's phase r - 1).
    MbarWait(SmemAddr(&empty_bar[i % S]), ((i / S) - 1) & 1);
    load_weights(i);
    load_x(i);
  }
}

// One k-tile's wgmmas of consumer warpgroup cw from the stage at `stage`:
// the 4 k32-steps of its T weight boxes against the x box, committed as one
// group. scale_first: whether the first step adds to d (0: the group's sum
// starts from zero).
template <int N, int C, int T, int S>
__device__ __forceinline__ void IssueTile(float (&d)[T][N / 2], uint32_t stage, int cw, int scale_first) {
  using L = Shape<N, C, T, S>;
  const uint64_t b_desc = SmemDescSw128(stage + L::kWBytes);
#pragma unroll
  for (int tt = 0; tt < T; ++tt) FenceRegs(d[tt]);
  WgmmaFence();
#pragma unroll
  for (int kk = 0; kk < kTileK / 32; ++kk) {
#pragma unroll
    for (int tt = 0; tt < T; ++tt) {
      const uint64_t a_desc = SmemDescSw128(stage + (cw * T + tt) * kBoxBytes);
      // +32 bytes of k per step: +2 in the 16-byte start-address field.
      WgmmaE4M3<N>(d[tt], a_desc + 2 * kk, b_desc + 2 * kk, kk > 0 ? 1 : scale_first);
    }
  }
  WgmmaCommit();
}

// The consumers' sums over units [u, seg_end) of one row tile into acc;
// i counts the units consumed (the ring position). P: each k-tile's sum is
// computed alone and added to acc in fp32 (one wait per tile); else the
// accumulators chain across tiles in the tensor cores, one group in flight.
template <int N, int C, int T, int S, bool P>
__device__ __forceinline__ void ConsumeSegment(float (&acc)[T][N / 2], uint32_t ring, uint64_t (&full_bar)[S],
                                               uint64_t (&empty_bar)[S], int& u, int& i, int seg_end, int cw,
                                               int lane) {
  using L = Shape<N, C, T, S>;
  constexpr int kAcc = L::kAcc;
  // P: tile sums (4 k32-steps from zero) land here first.
  float part[P ? T : 1][P ? kAcc : 1];
#pragma unroll
  for (int tt = 0; tt < (P ? T : 1); ++tt)
#pragma unroll
    for (int r = 0; r < (P ? kAcc : 1); ++r) part[tt][r] = 0.0f;

  for (const int first = i; u < seg_end; ++u, ++i) {
    const int s = i % S;
    MbarWait(SmemAddr(&full_bar[s]), (i / S) & 1);
    const uint32_t stage = ring + static_cast<uint32_t>(s * L::kStageBytes);
    if constexpr (P) {
      IssueTile<N, C, T, S>(part, stage, cw, 0);
      WgmmaWait<0>();
#pragma unroll
      for (int tt = 0; tt < T; ++tt) FenceRegs(part[tt]);
      if (lane == 0) MbarArrive(SmemAddr(&empty_bar[s]));
#pragma unroll
      for (int tt = 0; tt < T; ++tt)
#pragma unroll
        for (int r = 0; r < kAcc; ++r) acc[tt][r] += part[tt][r];
    } else {
      IssueTile<N, C, T, S>(acc, stage, cw, 1);
#pragma unroll
      for (int tt = 0; tt < T; ++tt) FenceRegs(acc[tt]);
      // Keep this unit's group in flight; the previous one (of this
      // segment: the last of the previous segment was released at its
      // end) has completed, so its stage may be refilled.
      WgmmaWait<1>();
      if (i > first && lane == 0) MbarArrive(SmemAddr(&empty_bar[(i - 1) % S]));
    }
  }
  if constexpr (!P) {
    WgmmaWait<0>();
#pragma unroll
    for (int tt = 0; tt < T; ++tt) FenceRegs(acc[tt]);
    if (lane == 0) MbarArrive(SmemAddr(&empty_bar[(i - 1) % S]));
  }
}

// Part of a row tile: every contributor writes its raw sums (no scales) to
// its workspace slot, float4s laid out [quad][thread] (coalesced); the last
// to arrive adds the parts in CTA order (so the bits do not depend on who is
// last), resets the counter and returns true with the sum in acc.
template <int N, int C, int T, int S>
__device__ __forceinline__ bool MergeSplitTile(const KernelArgs& a, float (&acc)[T][N / 2], int cta, int tile,
                                               int ctid, int& last_flag) {
  using L = Shape<N, C, T, S>;
  constexpr int kAcc = L::kAcc, kQuads = L::kQuads, kConsumers = L::kConsumers;
  const int nk = a.k_tiles;
  float4* ws = reinterpret_cast<float4*>(a.workspace);
  const size_t slot_quads = static_cast<size_t>(kQuads) * kConsumers;
  float4* mine = ws + SlotOf(a, cta, tile) * slot_quads + ctid;
#pragma unroll
  for (int q = 0; q < kQuads; ++q) {
    const int r = 4 * q;
    __stcg(mine + q * kConsumers, make_float4(acc[r / kAcc][r % kAcc], acc[(r + 1) / kAcc][(r + 1) % kAcc],
                                              acc[(r + 2) / kAcc][(r + 2) % kAcc], acc[(r + 3) / kAcc][(r + 3) % kAcc]));
  }
  __threadfence();
  const int c_first = CtaOfUnit(a, tile * nk), c_last = CtaOfUnit(a, (tile + 1) * nk - 1);
  ConsumerBarrier(kConsumers);
  if (ctid == 0) last_flag = atomicAdd(&a.counters[tile], 1) == c_last - c_first;
  ConsumerBarrier(kConsumers);
  const bool last = last_flag;
  ConsumerBarrier(kConsumers);  // last_flag is read before a later segment rewrites it
  if (!last) return false;
  __threadfence();
  // Sum in CTA order c_first .. c_last. Own sums stay in registers when
  // they come first; otherwise they are re-read (same bits).
  for (int c = c_first; c <= c_last; ++c) {
    if (c == cta && c == c_first) continue;
    const float4* src = ws + SlotOf(a, c, tile) * slot_quads + ctid;
    float4 v[kQuads];
#pragma unroll
    for (int q = 0; q < kQuads; ++q) v[q] = __ldcg(src + q * kConsumers);  // all in flight at once
#pragma unroll
    for (int q = 0; q < kQuads; ++q) {
      const float f[4] = {v[q].x, v[q].y, v[q].z, v[q].w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float& d = acc[(4 * q + e) / kAcc][(4 * q + e) % kAcc];
        d = c == c_first ? f[e] : d + f[e];
      }
    }
  }
  if (ctid == 0) a.counters[tile] = 0;  // every part has arrived: ready for the next launch
  return true;
}

// Scales the accumulator fragments and stores rows < n, tokens < m.
// wsc[tt][h]: the weight scale of row row_base + 64 tt + g + 8 h.
template <int N, int T>
__device__ __forceinline__ void StoreTiles(const KernelArgs& a, const float (&acc)[T][N / 2], const float (&wsc)[T][2],
                                           int row_base, int g, int t) {
#pragma unroll
  for (int i = 0; i < N / 8; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int token = 8 * i + 2 * t + j;
      if (token >= a.m) continue;
      const float xs = a.x_scale[token];
#pragma unroll
      for (int tt = 0; tt < T; ++tt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row_base + tt * 64 + g + 8 * h;
          if (row >= a.n) continue;
          const float v = acc[tt][4 * i + 2 * h + j] * wsc[tt][h] * xs;
          const size_t o = static_cast<size_t>(token) * a.n + row;
          if (a.out_f32) {
            a.out_f32[o] = a.softcap > 0.0f ? a.softcap * tanhf(v / a.softcap) : v;
          } else {
            a.out_bf16[o] = __float2bfloat16(v);
          }
        }
      }
    }
  }
}

// The consumer warpgroups: every row-tile segment of this CTA's range,
// summed, merged across CTAs when split, and stored.
template <int N, int C, int T, int S, bool P>
__device__ __forceinline__ void Consume(const KernelArgs& a, uint32_t ring, uint64_t (&full_bar)[S],
                                        uint64_t (&empty_bar)[S], int& last_flag, int u_begin, int u_end) {
  using L = Shape<N, C, T, S>;
  constexpr int kAcc = L::kAcc;
  const int cta = blockIdx.x, nk = a.k_tiles;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int cw = warp / 4;                   // consumer warpgroup
  const int g = lane / 4, t = lane % 4;
  const int ctid = threadIdx.x;              // 0 .. kConsumers - 1
  const int row_in_tile = cw * T * 64 + (warp % 4) * 16;
  // x_scale, the workspace, the counters and the output may belong to the
  // previous kernel until this returns (nothing is lost: the first x box
  // comes only after the producer's own wait). x_scale goes to L1 for the
  // epilogue.
  WaitForPreviousKernel();
  AllowDependentLaunch();
  if (ctid * 32 < a.m) asm volatile("prefetch.global.L1 [%0];" ::"l"(a.x_scale + ctid * 32));

  int i = 0;  // units consumed = the ring position
  for (int u = u_begin; u < u_end;) {
    // One segment: the units of row tile `tile` in this CTA's range.
    const int tile = u / nk;
    const int seg_end = min(u_end, (tile + 1) * nk);
    const bool whole = u == tile * nk && seg_end == (tile + 1) * nk;
    const int row_base = tile * L::kRows + row_in_tile;
    // The weight scales are constants: in flight during the segment.
    float wsc[T][2];
#pragma unroll
    for (int tt = 0; tt < T; ++tt)
#pragma unroll
      for (int h = 0; h < 2; ++h) wsc[tt][h] = __ldg(a.w_scale + min(row_base + tt * 64 + g + 8 * h, a.n - 1));
    float acc[T][kAcc];
#pragma unroll
    for (int tt = 0; tt < T; ++tt)
#pragma unroll
      for (int r = 0; r < kAcc; ++r) acc[tt][r] = 0.0f;
    ConsumeSegment<N, C, T, S, P>(acc, ring, full_bar, empty_bar, u, i, seg_end, cw, lane);
    if (!whole && !MergeSplitTile<N, C, T, S>(a, acc, cta, tile, ctid, last_flag)) continue;
    StoreTiles<N, T>(a, acc, wsc, row_base, g, t);
  }
}

}  // namespace gemma::kernels::wgmma_fp8
