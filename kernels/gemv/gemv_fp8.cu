#include "kernels/gemv/gemv_fp8.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/stream_load.cuh"

namespace gemma::kernels {
namespace {

// Two E4M3 codes (low byte first) as a bf16x2 word, exactly: E4M3 -> f16
// (one cvt for the pair) -> f32 -> bf16; every E4M3 value is a bf16 value.
__device__ __forceinline__ uint32_t E4M3x2ToBf16x2(uint32_t two_codes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
  return *reinterpret_cast<const uint32_t*>(&b);
}

__device__ __forceinline__ void PrefetchL1(const float* ptr) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(ptr));
}

// Accumulator i of tile r: row row0 + 16 r + g + 8 (i / 2), batch row 2 t + (i % 2).
template <bool A16, int RT>
__device__ __forceinline__ void StoreTile(const GemvFp8Params& p, const float (&acc)[RT][4], int row0, int g,
                                          int t) {
#pragma unroll
  for (int r = 0; r < RT; ++r) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + r * 16 + g + 8 * (i / 2);
      const int b = 2 * t + (i % 2);
      if (row >= p.n || b >= p.batch) continue;
      const size_t o = static_cast<size_t>(b) * p.n + row;
      const float v = acc[r][i] * p.w_scale[row] * (A16 ? 1.0f : p.x_scale[b]);
      if (p.out_f32) {
        p.out_f32[o] = p.softcap > 0.0f ? p.softcap * tanhf(v / p.softcap) : v;
      } else {
        p.out_bf16[o] = __float2bfloat16(v);
      }
    }
  }
}

// Fragment mapping (PTX ISA, mma.m16n8k32 with 8-bit types). Lane = 4 g + t.
// A registers: a0 = row g, k 4t..4t+3; a1 = row g+8, same k; a2 = row g,
// k 16+4t..16+4t+3; a3 = row g+8, same k. B registers: b0 = k 4t..4t+3 of
// column g, b1 = k 16+4t..16+4t+3. A dot product may visit k in any order as
// long as A and B agree, and every slot a lane holds depends on t only: lane
// (g, t) loads the 16-byte chunk c(t) of weight rows g and g+8 and of x row g,
// and the chunk's words .x .y feed slots (4t, 16+4t) of one MMA, .z .w the
// same slots of a second. A warp step covers 16 rows x 4 chunks (64 k).
//
// A16 (bf16 activations): the lane's chunk of 16 codes becomes 8 bf16x2
// words (word i = k 2i, 2i+1 of the chunk), and x's same 16 k are 32 bytes of
// bf16; m16n8k16 j of the chunk takes words 2j, 2j+1 into slots (2t, 2t+8) of
// A (rows g, g+8) and B. The same argument holds: slots depend on t only.
//
// A group of KS warps owns RT tiles of 16 rows; warp `part` reads the chunk
// slice [part, part + 1) * kvec / KS, U steps of 4 chunks in flight per tile
// row. Weights are prefetched before waiting for the previous kernel.
//
// PIPE ("q-" tilings) keeps two register sets of weights and x: the next
// step's loads are issued before the current step's MMAs, so every lane
// always has a step in flight (without it a lane's loads stop while it
// converts and multiplies, and only other warps keep the memory busy).
//
// A block covers block tiles bt = blockIdx.x, + gridDim.x, ...: one each when
// the grid has a block per tile; persistent launches (Launch's `persistent`)
// give every resident block the same number of tiles, so no partial last wave.
// The loop bound is block-uniform, so the barriers inside are safe.
template <bool A16, int RT, int U, int KS, int WARPS, bool PIPE>
__global__ void __launch_bounds__(WARPS * 32) GemvFp8Kernel(const __grid_constant__ GemvFp8Params p) {
  static_assert(WARPS % KS == 0, "K split must divide the block");
  constexpr int kRowsPerBlock = (WARPS / KS) * RT * 16;
  constexpr int kXVecs = A16 ? 2 : 1;  // 16-byte x vectors per chunk
  constexpr int kStages = PIPE ? 2 : 1;
  __shared__ float partial[KS > 1 ? WARPS : 1][RT * 4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int part = warp % KS;
  const int kvec = p.k / 16;
  const int beg = static_cast<int>(static_cast<int64_t>(kvec) * part / KS);
  const int end = static_cast<int>(static_cast<int64_t>(kvec) * (part + 1) / KS);
  const bool has_x = g < p.batch;
  const size_t x_row = static_cast<size_t>(has_x ? g : 0) * p.k;
  const uint4* x = A16 ? reinterpret_cast<const uint4*>(p.x_bf16 + x_row) : reinterpret_cast<const uint4*>(p.x + x_row);
  const int num_block_tiles = (p.n + kRowsPerBlock - 1) / kRowsPerBlock;

  const uint4* w[RT][2];
  // Points w at block tile bt's rows and pulls their scales into L1 (no
  // registers held: a dependent DRAM miss in the epilogue would lengthen
  // every tail).
  auto set_tile = [&](int bt) {
    const int row0 = bt * kRowsPerBlock + (warp / KS) * (RT * 16);
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = min(row0 + r * 16 + h * 8 + g, p.n - 1);  // rows past n: never stored
        w[r][h] = reinterpret_cast<const uint4*>(p.w + static_cast<size_t>(row) * p.k);
        PrefetchL1(p.w_scale + row);
      }
    }
  };
  uint4 wv[kStages][U][RT][2];
  uint4 xv[kStages][U][kXVecs];
  auto load = [&](int s, int base) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + 4 * u + t;
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) wv[s][u][r][h] = c < end ? LoadStream(w[r][h] + c) : make_uint4(0, 0, 0, 0);
    }
  };
  auto load_x = [&](int s, int base) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + 4 * u + t;
#pragma unroll
      for (int j = 0; j < kXVecs; ++j) {
        xv[s][u][j] = has_x && c < end ? __ldg(x + kXVecs * c + j) : make_uint4(0, 0, 0, 0);
      }
    }
  };
  auto multiply = [&](int s, float (&acc)[RT][4]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        const uint4& a = wv[s][u][r][0];
        const uint4& b = wv[s][u][r][1];
        if constexpr (A16) {
          const uint32_t aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
          const uint32_t xw[8] = {xv[s][u][0].x, xv[s][u][0].y, xv[s][u][0].z, xv[s][u][0].w,
                                  xv[s][u][1].x, xv[s][u][1].y, xv[s][u][1].z, xv[s][u][1].w};
#pragma unroll
          for (int j = 0; j < 4; ++j) {  // word j of the codes: k 4j..4j+3 of the chunk
            MmaBf16(acc[r], E4M3x2ToBf16x2(aw[j]), E4M3x2ToBf16x2(bw[j]), E4M3x2ToBf16x2(aw[j] >> 16),
                    E4M3x2ToBf16x2(bw[j] >> 16), xw[2 * j], xw[2 * j + 1]);
          }
        } else {
          MmaE4M3(acc[r], a.x, b.x, a.y, b.y, xv[s][u][0].x, xv[s][u][0].y);
          MmaE4M3(acc[r], a.z, b.z, a.w, b.w, xv[s][u][0].z, xv[s][u][0].w);
        }
      }
    }
  };

  if (static_cast<int>(blockIdx.x) >= num_block_tiles) {  // block-uniform; never with Launch's grids
    WaitForPreviousKernel();  // every block waits before it exits (pdl.cuh)
    return;
  }
  set_tile(blockIdx.x);
  load(0, beg);
  for (int bt = blockIdx.x; bt < num_block_tiles; bt += gridDim.x) {
    const int row0 = bt * kRowsPerBlock + (warp / KS) * (RT * 16);
    float acc[RT][4];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][i] = 0.0f;

    WaitForPreviousKernel();  // returns at once after the first tile
    // A PDL-launched successor (the residual norm) may now launch and load
    // its weights during this kernel.
    AllowDependentLaunch();
    if constexpr (!A16) PrefetchL1(p.x_scale + min(2 * t, p.batch - 1));
    constexpr int kStep = 4 * U;
    if constexpr (PIPE) {
      // Stage 0 holds `base` on entry; the loop alternates the stages.
      load_x(0, beg);
      for (int base = beg; base < end;) {
        if (base + kStep < end) load(1, base + kStep), load_x(1, base + kStep);
        multiply(0, acc);
        base += kStep;
        if (base >= end) break;
        if (base + kStep < end) load(0, base + kStep), load_x(0, base + kStep);
        multiply(1, acc);
        base += kStep;
      }
    } else {
      for (int base = beg; base < end;) {
        load_x(0, base);
        multiply(0, acc);
        base += kStep;
        if (base < end) load(0, base);
      }
    }
    // Persistent blocks: the next tile's first loads fly during this one's
    // reduction and store.
    if (bt + static_cast<int>(gridDim.x) < num_block_tiles) {
      set_tile(bt + gridDim.x);
      load(0, beg);
    }

    if constexpr (KS > 1) {
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int i = 0; i < 4; ++i) partial[warp][r * 4 + i][lane] = acc[r][i];
      __syncthreads();
      if (part == 0) {
#pragma unroll
        for (int r = 0; r < RT; ++r)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            float v = acc[r][i];
#pragma unroll
            for (int q = 1; q < KS; ++q) v += partial[warp + q][r * 4 + i][lane];
            acc[r][i] = v;
          }
      }
      __syncthreads();  // partial is rewritten by the next tile
    }
    if (part == 0) StoreTile<A16, RT>(p, acc, row0, g, t);
  }
}

// One block per block tile, or (`persistent`) as many blocks as fit on the
// device at once, trimmed so that every block gets the same number of tiles.
template <int RT, int U, int KS, int WARPS, bool A16 = false, bool persistent = false, bool PIPE = false>
void Launch(const GemvFp8Params& p, cudaStream_t stream) {
  constexpr auto kernel = GemvFp8Kernel<A16, RT, U, KS, WARPS, PIPE>;
  const int rows_per_block = (WARPS / KS) * RT * 16;
  const int tiles = (p.n + rows_per_block - 1) / rows_per_block;
  int blocks = tiles;
  if constexpr (persistent) blocks = PersistentGrid(tiles, ResidentBlocks<kernel>(WARPS * 32));
  LaunchWithPdl(kernel, dim3(blocks), dim3(WARPS * 32), 0, stream, p);
}

// t<16-row tiles per warp>u<4-chunk steps in flight>k<warps splitting K>,
// w<warps per block> where it differs from 4 (or from k when k > 4).
struct Tiling {
  const char* name;
  void (*launch)(const GemvFp8Params&, cudaStream_t);
};
constexpr Tiling kTilings[] = {
    {"t1u4", Launch<1, 4, 1, 4>},        {"t1u8", Launch<1, 8, 1, 4>},
    {"t2u4", Launch<2, 4, 1, 4>},        {"t4u2", Launch<4, 2, 1, 4>},
    {"t1u4k2", Launch<1, 4, 2, 4>},      {"t1u8k2", Launch<1, 8, 2, 4>},
    {"t1u4k4", Launch<1, 4, 4, 4>},      {"t1u8k4", Launch<1, 8, 4, 4>},
    {"t2u4k4", Launch<2, 4, 4, 4>},      {"t1u4k8", Launch<1, 4, 8, 8>},
    {"t1u8k8", Launch<1, 8, 8, 8>},      {"t2u4k8", Launch<2, 4, 8, 8>},
    // More bytes in flight per lane, and wider K splits that put a short
    // GEMV's whole stream in flight in one wave. 512-thread
    // blocks get at most 128 registers: u8 and t2u4 spill there, so not listed.
    {"t1u16k4", Launch<1, 16, 4, 4>},    {"t1u16k8", Launch<1, 16, 8, 8>},
    {"t2u8k4", Launch<2, 8, 4, 4>},      {"t1u8k2w8", Launch<1, 8, 2, 8>},
    {"t1u8k4w8", Launch<1, 8, 4, 8>},    {"t1u4k16", Launch<1, 4, 16, 16>},
    {"t2u2k16", Launch<2, 2, 16, 16>},
    // Persistent: one wave of equally loaded blocks.
    {"p-t1u8", Launch<1, 8, 1, 4, false, true>},     {"p-t1u8k4", Launch<1, 8, 4, 4, false, true>},
    {"p-t1u4k4", Launch<1, 4, 4, 4, false, true>},   {"p-t2u4k4", Launch<2, 4, 4, 4, false, true>},
    {"p-t1u4k8", Launch<1, 4, 8, 8, false, true>},   {"p-t1u8k8", Launch<1, 8, 8, 8, false, true>},
    // Pipelined (two register stages).
    {"q-t1u4", Launch<1, 4, 1, 4, false, false, true>},   {"q-t1u4k4", Launch<1, 4, 4, 4, false, false, true>},
    {"q-t1u2k4", Launch<1, 2, 4, 4, false, false, true>}, {"q-t2u2k4", Launch<2, 2, 4, 4, false, false, true>},
    {"p-q-t1u4k4", Launch<1, 4, 4, 4, false, true, true>},
};
constexpr int kNumTilings = sizeof(kTilings) / sizeof(kTilings[0]);
// Same default as the bf16 tensor-core GEMV (t1u8k4); autotuning may pick others.
constexpr int kDefaultTiling = 7;

// bf16 activations (no quantization launch): the same tilings where the
// doubled x registers do not spill.
constexpr Tiling kA16Tilings[] = {
    {"a16-t1u4", Launch<1, 4, 1, 4, true>},       {"a16-t1u4k4", Launch<1, 4, 4, 4, true>},
    {"a16-t1u8k4", Launch<1, 8, 4, 4, true>},     {"a16-t2u4k4", Launch<2, 4, 4, 4, true>},
    {"a16-t1u4k8", Launch<1, 4, 8, 8, true>},     {"a16-t1u8k8", Launch<1, 8, 8, 8, true>},
    {"a16-t1u8k4w8", Launch<1, 8, 4, 8, true>},   {"a16-t1u4k16", Launch<1, 4, 16, 16, true>},
    {"a16-t1u16k4", Launch<1, 16, 4, 4, true>},
    {"a16-p-t1u8k4", Launch<1, 8, 4, 4, true, true>}, {"a16-p-t1u4k4", Launch<1, 4, 4, 4, true, true>},
    {"a16-p-t1u4k8", Launch<1, 4, 8, 8, true, true>},
    {"a16-q-t1u4", Launch<1, 4, 1, 4, true, false, true>},   {"a16-q-t1u2", Launch<1, 2, 1, 4, true, false, true>},
    {"a16-q-t1u4k4", Launch<1, 4, 4, 4, true, false, true>}, {"a16-q-t1u2k4", Launch<1, 2, 4, 4, true, false, true>},
    {"a16-q-t1u2k8", Launch<1, 2, 8, 8, true, false, true>}, {"a16-p-q-t1u4k4", Launch<1, 4, 4, 4, true, true, true>},
};
constexpr int kNumA16Tilings = sizeof(kA16Tilings) / sizeof(kA16Tilings[0]);

const Tiling& TilingOf(int variant) {
  return variant < kNumTilings ? kTilings[variant] : kA16Tilings[variant - kNumTilings];
}

}  // namespace

int NumGemvFp8Variants() { return kNumTilings + kNumA16Tilings; }

bool GemvFp8VariantTakesBf16(int variant) { return variant >= kNumTilings && variant < NumGemvFp8Variants(); }

const char* GemvFp8VariantName(int variant) {
  return variant >= 0 && variant < NumGemvFp8Variants() ? TilingOf(variant).name : "default";
}

std::string LaunchGemvFp8(const GemvFp8Params& p, cudaStream_t stream) {
  if (!p.w || !p.w_scale) return "gemv_fp8: null weights";
  if (GemvFp8VariantTakesBf16(p.variant) ? !p.x_bf16 : (!p.x || !p.x_scale)) {
    return "gemv_fp8: null input (E4M3 x and x_scale, or x_bf16 for a16 variants)";
  }
  if ((p.out_bf16 == nullptr) == (p.out_f32 == nullptr)) return "gemv_fp8: need exactly one output";
  if (p.n <= 0 || p.k <= 0 || p.k % 16 != 0) return "gemv_fp8: need n >= 1 and k a positive multiple of 16";
  if (p.batch < 1 || p.batch > kGemvMaxBatch) return "gemv_fp8: batch must be 1..8";
  if (p.softcap > 0.0f && !p.out_f32) return "gemv_fp8: softcap needs fp32 output";
  if (p.variant < -1 || p.variant >= NumGemvFp8Variants()) return "gemv_fp8: unknown variant";
  TilingOf(p.variant < 0 ? kDefaultTiling : p.variant).launch(p, stream);
  return LaunchError("gemv_fp8");
}

}  // namespace gemma::kernels
