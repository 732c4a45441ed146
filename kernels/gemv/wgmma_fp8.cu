// Design notes (see the header for the contract).
//
// CTA = C consumer warpgroups (warps 0 .. 4C-1) + one producer warp (warp 4C).
// A row tile is BM = 64 * C * T weight rows; a k-tile is 128 k values (128
// bytes of E4M3: exactly one 128-byte swizzle span).
//
// Shared memory: a ring of S stages, each [C * T weight boxes of 64 rows x
// 128 B][one x box of N rows x 128 B], every box 1024-byte aligned (the
// 128-byte swizzle repeats every 8 rows x 128 B = 1024 B, and both TMA and
// wgmma compute it from the absolute shared address bits [4:6] ^ [7:9]).
// Stage s has two mbarriers: full[s] (1 arrival, the producer's
// arrive.expect_tx of the stage's bytes, plus the TMA transaction bytes) and
// empty[s] (4C arrivals, lane 0 of each consumer warp once the wgmmas that
// read the stage have completed).
//
// Producer (lane 0 of the producer warp): issues the weight boxes of the
// first min(S, units of its run) stages, then griddepcontrol.wait (weights
// are constants; x, the workspace and the counters may be written by the
// previous kernel), lets dependents launch, issues those stages' x boxes,
// then the steady state: wait empty[s], expect_tx, weight boxes + x box. The
// consumers griddepcontrol.wait before anything else (they could not start
// before the first x box anyway). So
// every thread of every CTA waits before it exits, and only constants are
// read before the wait (the PDL rule in kernels/common/pdl.cuh).
//
// No setmaxnreg: a consumer thread holds T x N / 2 <= 64 fp32 accumulators
// (twice that with promotion; ptxas: 42-154 registers per thread, no
// spills, at most 288 threads), so registers never limit the 1-2 CTAs per SM
// that shared memory allows, and setmaxnreg (warpgroup-wide) would need the
// producer to be a whole warpgroup of idle warps just to hand registers to
// threads that lack none.
//
// Consumer warpgroup cw, k-tile i (stage s = i % S, use r = i / S): wait
// full[s] (parity r & 1); wgmma.fence; for the 4 k32-steps of the tile and
// its T weight boxes: wgmma m64nNk32 (A = weight box, B = x box, both
// K-major, 128B swizzle); commit_group. Then either
//   P = false ("wg-"): wait_group 1 (the group just issued stays in flight;
//     the accumulators chain across tiles in the tensor cores) and release
//     the previous stage; wait_group 0 after the loop; or
//   P = true ("wgp-"): the tile's first step has scale-d = 0, so the group
//     computes the tile's sum alone; wait_group 0, release the stage, add
//     the sums to fp32 accumulators (FADD). Hopper's FP8 MMA accumulates
//     with ~14 significant bits, so the "wg-" error grows with K (cuBLASLt's
//     fast accumulation, which the engine's FP8 GEMMs use, has the same);
//     promotion every 128 k bounds it at the cost of a wait per tile.
//
// Work units: (row tile, 128-k tile) pairs, numbered tile * k_tiles + kt.
// Every CTA takes a contiguous run of them (RangeBegin): one row tile's K
// split in `splits` equal parts (CTA c = tile * splits + split), or, with
// stream-K, an equal share of all units (a persistent one-wave grid; a run
// may start and end inside row tiles). The producer streams the run through
// the ring without a break at row-tile boundaries; the consumers close a
// segment at each boundary. A segment that is a whole row tile is stored
// directly. Otherwise every contributor writes its raw sums (no scales) to
// its workspace slot, [float4 of registers][consumer thread] (coalesced),
// __threadfence, and one thread counts the arrival on counters[tile]; the
// CTA that brings the count to the number of contributors sums the parts in
// CTA order (its own from registers when first: the same bits), all loads of
// a part in flight at once, resets the counter to 0 and stores. The sum
// order does not depend on which CTA arrives last: bit-identical results.
// (The fixup once loaded one float per step of a runtime loop: its L2 round
// trips in series made every split launch slower than the unsplit one.)
//
// PTX ISA references are to the 9.x manual's section 9.7.15 "Asynchronous
// Warpgroup Level Matrix Multiply-Accumulate Instructions" (docs.nvidia.com/
// cuda/parallel-thread-execution, anchors named in brackets).
//
// Accumulator fragment (9.7.15.5.1.1 "Register Fragments", the figure "WGMMA
// .m64nNk32 register fragment layout for accumulator matrix D", fp32): warp w of the
// warpgroup holds rows 16 w .. 16 w + 15 of the 64-row tile; lane = 4 g + t;
// register 4 i + 2 h + j holds row 16 w + g + 8 h, column (token) 8 i + 2 t + j
// (i < N / 8, h, j in {0, 1}): the mma.sync m16n8 C layout repeated N / 8
// times along N.
//
// Shared-memory matrix descriptor (9.7.15.5.1.2 "Shared Memory Matrix
// Layout", its "Matrix Descriptor" table [#asynchronous-warpgroup-level-
// matrix-shared-memory-layout-matrix-descriptor]; the 64-bit a-desc / b-desc
// operand of wgmma.mma_async):
//   bits  0-13  start address: (shared address & 0x3FFFF) >> 4
//   bits 16-29  leading dimension byte offset >> 4: the distance between
//               core matrices along K. Not used for K-major operands with a
//               swizzle when the instruction's K (32 bytes here) lies within
//               one swizzle span (128 B); set to 1 (16 B), the conventional
//               "unused" value.
//   bits 32-45  stride dimension byte offset >> 4: the distance between
//               consecutive groups of 8 rows (M for A, N for B): 8 x 128 B =
//               1024 B -> 64.
//   bits 49-51  matrix base offset: 0. The manual: 0 when the swizzle's
//               repeating pattern starts at a 1024-byte boundary (128-byte
//               swizzle), else (pattern start address >> 7) & 7. Every box
//               starts 1024-byte aligned, and the k-steps' +0/32/64/96 B do
//               not move the pattern start (address bits [7:9] stay 0).
//   bits 62-63  swizzle mode: 1 = 128-byte swizzle (2 = 64 B, 3 = 32 B,
//               0 = none).
// K-step kk of a k-tile starts 32 * kk bytes into the box (the start address
// field + 2 kk): within a 128-byte swizzled row the hardware applies the
// XOR to the computed address, so the unswizzled offset is what we add (the
// TMA box was written with the matching CU_TENSOR_MAP_SWIZZLE_128B, whose
// pattern is the same function of the shared address).
//
// The wgmma instruction (9.7.15.5.2 "wgmma.mma_async" [#asynchronous-
// warpgroup-level-matrix-instructions-wgmma-mma-async]):
//   wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3 d, a-desc, b-desc,
//       scale-d, imm-scale-a, imm-scale-b;
// FP8 has no transpose immediates: both operands must be K-major, which the
// row-major w [n, k] (A = M x K) and x [m, k] (B = K x N stored N x K) are.
// scale-d = 1 (accumulate into the zero-initialized registers).
#include "kernels/gemv/wgmma_fp8.h"

#include <cuda.h>  // CUtensorMap and its enums only: nothing links libcuda
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/common/launch.h"
#include "kernels/common/pdl.cuh"

namespace gemma::kernels {
namespace {

static_assert(sizeof(WgmmaFp8TensorMap) == sizeof(CUtensorMap) && alignof(WgmmaFp8TensorMap) >= alignof(CUtensorMap),
              "WgmmaFp8TensorMap must hold a CUtensorMap");

constexpr int kTileK = 128;                          // k values (bytes) per k-tile = the 128-byte swizzle span
constexpr int kBoxBytes = kWgmmaFp8BoxRows * kTileK;  // one weight box: 8 KiB
constexpr int kSwizzleAtom = 1024;                   // 8 rows x 128 B

// ---- PTX wrappers (sm_90a) ----

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void MbarInit(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Arrives once and adds `bytes` to the phase's expected transaction count.
__device__ __forceinline__ void MbarArriveExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void MbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Returns once the phase of parity `parity` has completed (acquire). The
// spin is one asm block: no divergent C++ loop in front of the .aligned
// wgmma instructions.
__device__ __forceinline__ void MbarWait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// 2-D TMA load of the box at (c0 = k, c1 = row) into shared `dst`,
// completing `bytes` on mbarrier `bar`. Out-of-bounds elements are zero.
__device__ __forceinline__ void TmaLoad2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// The same with an L2 cache policy (the weights: evict first).
__device__ __forceinline__ void TmaLoad2dHint(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar,
                                              uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3}], "
      "[%4], %5;" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "l"(policy)
      : "memory");
}

__device__ __forceinline__ void PrefetchTensorMap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

__device__ __forceinline__ void WgmmaFence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void WgmmaCommit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accesses of the accumulators across the
// asynchronous wgmma that owns them.
template <int R>
__device__ __forceinline__ void FenceRegs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Named barrier over the consumer warpgroups only (the producer warp never
// joins; id 0 is __syncthreads).
__device__ __forceinline__ void ConsumerBarrier(int threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

// The matrix descriptor of a K-major, 128-byte-swizzled operand whose rows
// are 128 bytes apart, starting at shared address `addr` (see the notes at
// the top for each field).
__device__ __forceinline__ uint64_t SmemDescSw128(uint32_t addr) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((addr & 0x3FFFFu) >> 4);         // bits 0-13: start address >> 4
  d |= static_cast<uint64_t>(1) << 16;                        // bits 16-29: LBO (unused here) = 16 B
  d |= static_cast<uint64_t>(kSwizzleAtom >> 4) << 32;        // bits 32-45: SBO = 1024 B between 8-row groups
  d |= static_cast<uint64_t>(1) << 62;                        // bits 62-63: 128-byte swizzle; 49-51 base offset 0
  return d;
}

// d[N/2] = A (64 x 32 e4m3 at a_desc) * B (32 x N e4m3 at b_desc)
// + (scale_d ? d : 0).
template <int N>
__device__ __forceinline__ void WgmmaE4M3(float (&d)[N / 2], uint64_t a_desc, uint64_t b_desc, int scale_d);

template <>
__device__ __forceinline__ void WgmmaE4M3<16>(float (&d)[8], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, "
      "%8, %9, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}

template <>
__device__ __forceinline__ void WgmmaE4M3<32>(float (&d)[16], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "%16, %17, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}

template <>
__device__ __forceinline__ void WgmmaE4M3<64>(float (&d)[32], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}

template <>
__device__ __forceinline__ void WgmmaE4M3<128>(float (&d)[64], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}

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

// N tokens per wgmma, C consumer warpgroups of T 64-row tiles, S stages;
// P: promote each k-tile's tensor-core sum into fp32 registers.
template <int N, int C, int T, int S, bool P>
__global__ void __launch_bounds__(C * 128 + 32) WgmmaFp8Kernel(const __grid_constant__ CUtensorMap wmap,
                                                                const __grid_constant__ CUtensorMap xmap,
                                                                const __grid_constant__ KernelArgs a) {
  constexpr int kRows = 64 * C * T;            // weight rows per CTA
  constexpr int kWBytes = kRows * kTileK;      // weight boxes of a stage
  constexpr int kXBytes = N * kTileK;          // x box of a stage
  constexpr int kStageBytes = kWBytes + kXBytes;
  constexpr int kAcc = N / 2;                  // fp32 accumulators per thread per 64-row tile
  constexpr int kConsumers = C * 128;
  constexpr int kQuads = T * kAcc / 4;         // float4s of one thread's partial sums
  static_assert(kXBytes % kSwizzleAtom == 0 && kStageBytes % kSwizzleAtom == 0, "stages must stay 1024-aligned");
  static_assert(N % 16 == 0 && N >= 16 && N <= 256, "wgmma N");
  static_assert(kAcc % 4 == 0, "partials move as float4");

  __shared__ __align__(8) uint64_t full_bar[S];
  __shared__ __align__(8) uint64_t empty_bar[S];
  __shared__ int last_flag;
  extern __shared__ uint8_t smem_raw[];  // launched with S * kStageBytes + 1024 bytes
  const uint32_t ring = (SmemAddr(smem_raw) + (kSwizzleAtom - 1)) & ~static_cast<uint32_t>(kSwizzleAtom - 1);

  const int cta = blockIdx.x;
  const int u_begin = RangeBegin(a, cta), u_end = RangeBegin(a, cta + 1);
  const int nk = a.k_tiles;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  if (threadIdx.x == kConsumers) {
    for (int s = 0; s < S; ++s) {
      MbarInit(SmemAddr(&full_bar[s]), 1);
      MbarInit(SmemAddr(&empty_bar[s]), 4 * C);
    }
    // Make the initialized barriers visible to the async proxy (TMA).
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();

  if (warp == 4 * C) {
    // ---- producer warp: lane 0 issues every TMA ----
    if (lane == 0) {
      PrefetchTensorMap(&wmap);
      PrefetchTensorMap(&xmap);
      uint64_t policy;
      asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
      // Unit i of this CTA (work unit u_begin + i) goes through stage i % S.
      // Weight boxes that start past row n are not loaded: their accumulator
      // rows (computed from whatever the stage held) are never stored, and
      // no TMA box is ever entirely out of bounds. Partly out-of-bounds
      // boxes (rows or k) are zero-filled and count in full.
      auto load_weights = [&](int i) {
        const int u = u_begin + i, row0 = (u / nk) * kRows, kt = u % nk;
        const int boxes = min(C * T, (a.n - row0 + kWgmmaFp8BoxRows - 1) / kWgmmaFp8BoxRows);
        const uint32_t stage = ring + static_cast<uint32_t>((i % S) * kStageBytes);
        const uint32_t bar = SmemAddr(&full_bar[i % S]);
        MbarArriveExpectTx(bar, static_cast<uint32_t>(boxes * kBoxBytes + kXBytes));  // weights and x
#pragma unroll
        for (int b = 0; b < C * T; ++b) {
          if (b < boxes) TmaLoad2dHint(stage + b * kBoxBytes, &wmap, kt * kTileK, row0 + b * kWgmmaFp8BoxRows, bar, policy);
        }
      };
      auto load_x = [&](int i) {
        const uint32_t stage = ring + static_cast<uint32_t>((i % S) * kStageBytes);
        TmaLoad2d(stage + kWBytes, &xmap, ((u_begin + i) % nk) * kTileK, 0, SmemAddr(&full_bar[i % S]));
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
    } else {
      WaitForPreviousKernel();
      AllowDependentLaunch();
    }
    return;
  }

  // ---- consumer warpgroups ----
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
    const int row_base = tile * kRows + row_in_tile;
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
    // P: tile sums (4 k32-steps from zero) land here first.
    float part[P ? T : 1][P ? kAcc : 1];
#pragma unroll
    for (int tt = 0; tt < (P ? T : 1); ++tt)
#pragma unroll
      for (int r = 0; r < (P ? kAcc : 1); ++r) part[tt][r] = 0.0f;

    for (const int first = i; u < seg_end; ++u, ++i) {
      const int s = i % S;
      MbarWait(SmemAddr(&full_bar[s]), (i / S) & 1);
      const uint32_t stage = ring + static_cast<uint32_t>(s * kStageBytes);
      const uint64_t b_desc = SmemDescSw128(stage + kWBytes);
      if constexpr (P) {
#pragma unroll
        for (int tt = 0; tt < T; ++tt) FenceRegs(part[tt]);
        WgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kTileK / 32; ++kk) {
#pragma unroll
          for (int tt = 0; tt < T; ++tt) {
            const uint64_t a_desc = SmemDescSw128(stage + (cw * T + tt) * kBoxBytes);
            // +32 bytes of k per step: +2 in the 16-byte start-address field;
            // the tile's first step overwrites (scale-d = 0).
            WgmmaE4M3<N>(part[tt], a_desc + 2 * kk, b_desc + 2 * kk, kk > 0);
          }
        }
        WgmmaCommit();
        WgmmaWait<0>();
#pragma unroll
        for (int tt = 0; tt < T; ++tt) FenceRegs(part[tt]);
        if (lane == 0) MbarArrive(SmemAddr(&empty_bar[s]));
#pragma unroll
        for (int tt = 0; tt < T; ++tt)
#pragma unroll
          for (int r = 0; r < kAcc; ++r) acc[tt][r] += part[tt][r];
      } else {
#pragma unroll
        for (int tt = 0; tt < T; ++tt) FenceRegs(acc[tt]);
        WgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kTileK / 32; ++kk) {
#pragma unroll
          for (int tt = 0; tt < T; ++tt) {
            const uint64_t a_desc = SmemDescSw128(stage + (cw * T + tt) * kBoxBytes);
            // +32 bytes of k per step: +2 in the 16-byte start-address field.
            WgmmaE4M3<N>(acc[tt], a_desc + 2 * kk, b_desc + 2 * kk, 1);
          }
        }
        WgmmaCommit();
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

    if (!whole) {
      // Part of a row tile: every contributor writes its raw sums (no
      // scales) to its workspace slot, float4s laid out [quad][thread]
      // (coalesced); the last to arrive adds the parts in CTA order (so the
      // bits do not depend on who is last), resets the counter and stores.
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
      if (!last) continue;
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
    }
    StoreTiles<N, T>(a, acc, wsc, row_base, g, t);
  }
}

// ---- host side ----

using EncodeTiledFn = PFN_cuTensorMapEncodeTiled_v12000;

// cuTensorMapEncodeTiled from the driver, looked up once; null if absent.
EncodeTiledFn EncodeTiled() {
  static const EncodeTiledFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();  // not sticky; keep it out of the next launch's status
      f = nullptr;
    }
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

// The map of a row-major E4M3 matrix [rows, k]: boxes of box_rows x 128
// bytes, 128-byte swizzle, out-of-bounds elements zero (FLOAT_OOB_FILL_NONE),
// L2 promotion of 256 bytes.
std::string EncodeMatrix(const uint8_t* ptr, int rows, int k, int box_rows, CUtensorMap* out) {
  const EncodeTiledFn encode = EncodeTiled();
  if (encode == nullptr) return "wgmma_fp8: cuTensorMapEncodeTiled unavailable (driver too old?)";
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k)};  // bytes from one row to the next
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kTileK), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(out, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t*>(ptr), dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return "wgmma_fp8: cuTensorMapEncodeTiled failed (error " + std::to_string(r) + ")";
  return "";
}

template <int N, int C, int T, int S, bool P>
constexpr int SmemBytes() {
  return S * (64 * C * T + N) * kTileK + kSwizzleAtom;  // + alignment slack
}

// CTAs of this instantiation one SM holds (0 if none or the query failed);
// asked once per instantiation. Sets the shared-memory attribute first (to
// exactly what the kernel uses: a larger limit measured slower in decode
// steps on the H200, where kernels of every size follow each other).
template <int N, int C, int T, int S, bool P>
int CtasPerSm() {
  static const int ctas = [] {
    const auto kernel = WgmmaFp8Kernel<N, C, T, S, P>;
    int n = 0;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SmemBytes<N, C, T, S, P>()) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, C * 128 + 32, SmemBytes<N, C, T, S, P>()) !=
            cudaSuccess) {
      cudaGetLastError();
      n = 0;
    }
    return n;
  }();
  return ctas;
}

template <int N, int C, int T, int S, bool P>
std::string Launch(const WgmmaFp8Params& p, cudaStream_t stream) {
  constexpr int kRows = 64 * C * T;
  const auto kernel = WgmmaFp8Kernel<N, C, T, S, P>;
  // Once per instantiation (not a stream operation: also fine under capture).
  if (CtasPerSm<N, C, T, S, P>() == 0) return "wgmma_fp8: the kernel does not fit a multiprocessor";
  CUtensorMap xmap;
  std::string err = EncodeMatrix(p.x, p.m, p.k, N, &xmap);
  if (!err.empty()) return err;
  CUtensorMap wmap;
  static_assert(sizeof(wmap) == sizeof(p.w->map));
  std::memcpy(&wmap, &p.w->map, sizeof(wmap));
  KernelArgs a;
  a.w_scale = p.w_scale;
  a.x_scale = p.x_scale;
  a.out_bf16 = p.out_bf16;
  a.out_f32 = p.out_f32;
  a.workspace = p.workspace;
  a.counters = p.counters;
  a.n = p.n;
  a.m = p.m;
  a.k_tiles = (p.k + kTileK - 1) / kTileK;
  // More splits than k-tiles would leave CTAs without work inside a row
  // tile, which the fixup's count of contributors does not allow.
  a.splits = std::min(p.splits, a.k_tiles);
  const int tiles = (p.n + kRows - 1) / kRows;
  a.units = tiles * a.k_tiles;
  a.streamk = p.streamk_ctas > 0;
  // Stream-K: at most one CTA per unit, so that no range is empty.
  a.ctas = a.streamk ? std::min(p.streamk_ctas, a.units) : tiles * a.splits;
  a.softcap = p.softcap;
  LaunchWithPdl(kernel, dim3(a.ctas), dim3(C * 128 + 32), SmemBytes<N, C, T, S, P>(), stream, wmap, xmap, a);
  return LaunchError("wgmma_fp8");
}

struct Variant {
  const char* name;
  int n_tile;    // N: tokens per wgmma
  int rows;      // weight rows per CTA
  bool promote;  // fp32 promotion per k-tile
  std::string (*launch)(const WgmmaFp8Params&, cudaStream_t);
  int (*ctas_per_sm)();
};

// Shared memory per CTA = stages x (rows + N) x 128 B (+ 1 KiB slack); two
// CTAs fit an SM up to ~113 KiB each. "wg-": the tensor cores accumulate
// the whole K range (like cuBLASLt's fast accumulation, which the engine's
// FP8 GEMMs use); "wgp-": each 128-k tile is summed from zero and added to
// fp32 registers (Hopper's FP8 MMA keeps ~14 bits across its own
// accumulation), at the cost of a wait per tile and T x N / 2 registers.
#define GEMMA_WGMMA_VARIANT(n, c, t, s)                                                   \
  {"wg-n" #n "c" #c "t" #t "s" #s, n, 64 * c * t, false, Launch<n, c, t, s, false>,          \
   CtasPerSm<n, c, t, s, false>},                                                           \
  {"wgp-n" #n "c" #c "t" #t "s" #s, n, 64 * c * t, true, Launch<n, c, t, s, true>,           \
   CtasPerSm<n, c, t, s, true>}
constexpr Variant kVariants[] = {
    GEMMA_WGMMA_VARIANT(16, 1, 1, 8),   //  80 KiB, 2 CTAs/SM
    GEMMA_WGMMA_VARIANT(16, 1, 2, 6),   // 108 KiB, 2 CTAs/SM
    GEMMA_WGMMA_VARIANT(16, 2, 1, 6),   // 108 KiB, 2 CTAs/SM
    GEMMA_WGMMA_VARIANT(16, 2, 2, 4),   // 136 KiB
    GEMMA_WGMMA_VARIANT(32, 1, 2, 5),   // 100 KiB, 2 CTAs/SM
    GEMMA_WGMMA_VARIANT(32, 2, 1, 5),   // 100 KiB, 2 CTAs/SM
    GEMMA_WGMMA_VARIANT(32, 2, 2, 4),   // 144 KiB
    GEMMA_WGMMA_VARIANT(64, 1, 2, 4),   //  96 KiB, 2 CTAs/SM
    GEMMA_WGMMA_VARIANT(64, 2, 1, 4),   //  96 KiB, 2 CTAs/SM
    GEMMA_WGMMA_VARIANT(64, 2, 2, 5),   // 200 KiB
    GEMMA_WGMMA_VARIANT(128, 2, 1, 6),  // 192 KiB
};
#undef GEMMA_WGMMA_VARIANT
constexpr int kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);
// Defaults by token tile (before any tuning): promoted, two warpgroups of
// one 64-row tile each, 2 CTAs per SM where they fit.
constexpr int kDefaultN16 = 5, kDefaultN32 = 11, kDefaultN64 = 17, kDefaultN128 = 21;
static_assert(kVariants[kDefaultN16].n_tile == 16 && kVariants[kDefaultN16].promote && kVariants[kDefaultN16].rows == 128);
static_assert(kVariants[kDefaultN32].n_tile == 32 && kVariants[kDefaultN32].promote && kVariants[kDefaultN32].rows == 128);
static_assert(kVariants[kDefaultN64].n_tile == 64 && kVariants[kDefaultN64].promote && kVariants[kDefaultN64].rows == 128);
static_assert(kVariants[kDefaultN128].n_tile == 128 && kVariants[kDefaultN128].promote);

}  // namespace

std::string MakeWgmmaFp8Weights(const uint8_t* w, int n, int k, WgmmaFp8Weights* out) {
  if (out == nullptr || w == nullptr) return "wgmma_fp8: null weights";
  if (n <= 0 || k <= 0 || k % 16 != 0) return "wgmma_fp8: need n >= 1 and k a positive multiple of 16";
  if (reinterpret_cast<uintptr_t>(w) % 16 != 0) return "wgmma_fp8: weights must be 16-byte aligned";
  CUtensorMap map;
  const std::string err = EncodeMatrix(w, n, k, kWgmmaFp8BoxRows, &map);
  if (!err.empty()) return err;
  std::memcpy(&out->map, &map, sizeof(map));
  out->w = w;
  out->n = n;
  out->k = k;
  return "";
}

int NumWgmmaFp8Variants() { return kNumVariants; }

const char* WgmmaFp8VariantName(int variant) {
  return variant >= 0 && variant < kNumVariants ? kVariants[variant].name : "default";
}

bool WgmmaFp8VariantPromotes(int variant) {
  return variant < 0 || (variant < kNumVariants && kVariants[variant].promote);
}

int WgmmaFp8VariantMaxM(int variant) {
  if (variant == -1) return kWgmmaFp8MaxM;
  return variant >= 0 && variant < kNumVariants ? kVariants[variant].n_tile : 0;
}

bool WgmmaFp8VariantSupportsM(int variant, int m) { return m >= 1 && m <= WgmmaFp8VariantMaxM(variant); }

int WgmmaFp8DefaultVariant(int m) {
  return m <= 16 ? kDefaultN16 : m <= 32 ? kDefaultN32 : m <= 64 ? kDefaultN64 : kDefaultN128;
}

int WgmmaFp8RowsPerCta(int variant) {
  if (variant >= 0 && variant < kNumVariants) return kVariants[variant].rows;
  int rows = kVariants[0].rows;
  for (const Variant& v : kVariants) rows = std::min(rows, v.rows);
  return rows;
}

int WgmmaFp8RowTiles(int variant, int n) {
  const int rows = WgmmaFp8RowsPerCta(variant);
  return (n + rows - 1) / rows;
}

size_t WgmmaFp8WorkspaceFloats(int variant, int n, int splits) {
  if (splits <= 1) return 0;
  size_t most = 0;
  for (int v = 0; v < kNumVariants; ++v) {
    if (variant >= 0 && v != variant) continue;
    const size_t rows = static_cast<size_t>(WgmmaFp8RowTiles(v, n)) * kVariants[v].rows;
    most = std::max(most, rows * kVariants[v].n_tile * splits);
  }
  return most;
}

size_t WgmmaFp8StreamKWorkspaceFloats(int variant, int ctas) {
  if (ctas <= 0) return 0;
  size_t most = 0;
  for (int v = 0; v < kNumVariants; ++v) {
    if (variant >= 0 && v != variant) continue;
    most = std::max(most, static_cast<size_t>(kVariants[v].rows) * kVariants[v].n_tile);
  }
  return most * 2 * static_cast<size_t>(ctas);  // two partial segments per CTA at most
}

int WgmmaFp8CtasPerSm(int variant) {
  return variant >= 0 && variant < kNumVariants ? kVariants[variant].ctas_per_sm() : 0;
}

std::string LaunchWgmmaFp8(const WgmmaFp8Params& p, cudaStream_t stream) {
  if (p.w == nullptr || p.w->w == nullptr || p.w_scale == nullptr) return "wgmma_fp8: null weights";
  if (p.x == nullptr || p.x_scale == nullptr) return "wgmma_fp8: null input (x and x_scale)";
  if ((p.out_bf16 == nullptr) == (p.out_f32 == nullptr)) return "wgmma_fp8: need exactly one output";
  if (p.n <= 0 || p.k <= 0 || p.k % 16 != 0) return "wgmma_fp8: need n >= 1 and k a positive multiple of 16";
  if (p.w->n != p.n || p.w->k != p.k) return "wgmma_fp8: weight map shape differs from n x k";
  if (reinterpret_cast<uintptr_t>(p.x) % 16 != 0) return "wgmma_fp8: x must be 16-byte aligned";
  if (p.variant < -1 || p.variant >= kNumVariants) return "wgmma_fp8: unknown variant";
  const int variant = p.variant < 0 ? WgmmaFp8DefaultVariant(p.m) : p.variant;
  if (!WgmmaFp8VariantSupportsM(variant, p.m)) return "wgmma_fp8: m out of range for the variant";
  if (p.softcap > 0.0f && !p.out_f32) return "wgmma_fp8: softcap needs fp32 output";
  if (p.splits < 1 || p.splits > kWgmmaFp8MaxSplits) return "wgmma_fp8: splits must be 1..16";
  if (p.streamk_ctas < 0) return "wgmma_fp8: streamk_ctas must be >= 0";
  if (p.streamk_ctas > 0 && p.splits != 1) return "wgmma_fp8: stream-K takes splits = 1";
  if (p.splits > 1 && (p.workspace == nullptr || p.counters == nullptr)) {
    return "wgmma_fp8: splits > 1 needs workspace and counters";
  }
  if (p.streamk_ctas > 0 && (p.workspace == nullptr || p.counters == nullptr)) {
    return "wgmma_fp8: stream-K needs workspace and counters";
  }
  return kVariants[variant].launch(p, stream);
}

}  // namespace gemma::kernels
