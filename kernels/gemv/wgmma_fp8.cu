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
#include "kernels/gemv/wgmma_fp8_stages.cuh"

namespace gemma::kernels {
namespace {

static_assert(sizeof(WgmmaFp8TensorMap) == sizeof(CUtensorMap) && alignof(WgmmaFp8TensorMap) >= alignof(CUtensorMap),
              "WgmmaFp8TensorMap must hold a CUtensorMap");

using wgmma_fp8::KernelArgs;
using wgmma_fp8::kTileK;

// N tokens per wgmma, C consumer warpgroups of T 64-row tiles, S stages;
// P: promote each k-tile's tensor-core sum into fp32 registers. Warps
// 0 .. 4C-1 consume, warp 4C produces (wgmma_fp8_stages.cuh).
template <int N, int C, int T, int S, bool P>
__global__ void __launch_bounds__(C * 128 + 32) WgmmaFp8Kernel(const __grid_constant__ CUtensorMap wmap,
                                                                const __grid_constant__ CUtensorMap xmap,
                                                                const __grid_constant__ KernelArgs a) {
  __shared__ __align__(8) uint64_t full_bar[S];
  __shared__ __align__(8) uint64_t empty_bar[S];
  __shared__ int last_flag;
  extern __shared__ uint8_t smem_raw[];  // launched with S * kStageBytes + 1024 bytes
  const uint32_t ring = (SmemAddr(smem_raw) + (kSwizzleAtom - 1)) & ~static_cast<uint32_t>(kSwizzleAtom - 1);
  const int u_begin = wgmma_fp8::RangeBegin(a, blockIdx.x), u_end = wgmma_fp8::RangeBegin(a, blockIdx.x + 1);
  if (threadIdx.x == C * 128) wgmma_fp8::InitBarriers<C, S>(full_bar, empty_bar);
  __syncthreads();
  if (threadIdx.x / 32 == 4 * C) {
    if (threadIdx.x % 32 == 0) {
      wgmma_fp8::Produce<N, C, T, S>(wmap, xmap, a, ring, full_bar, empty_bar, u_begin, u_end);
    } else {  // the other lanes only take part in the PDL handshake
      WaitForPreviousKernel();
      AllowDependentLaunch();
    }
    return;
  }
  wgmma_fp8::Consume<N, C, T, S, P>(a, ring, full_bar, empty_bar, last_flag, u_begin, u_end);
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
// The attribute is set on every device that asks (SetSmemLimitOnThisDevice);
// the count is the first device's (a process drives GPUs of one kind).
template <int N, int C, int T, int S, bool P>
int CtasPerSm() {
  constexpr auto kernel = WgmmaFp8Kernel<N, C, T, S, P>;
  if (SetSmemLimitOnThisDevice<kernel>(SmemBytes<N, C, T, S, P>()) != cudaSuccess) return 0;
  static const int ctas = [kernel] {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, C * 128 + 32, SmemBytes<N, C, T, S, P>()) !=
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
  // Once per instantiation and device (not a stream operation: also fine under capture).
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
