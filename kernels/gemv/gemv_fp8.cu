#include "kernels/gemv/gemv_fp8.h"

#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/stream_load.cuh"

namespace gemma::kernels {
namespace {

// d += a (16x32 e4m3, row) * b (32x8 e4m3, col), fp32 accumulators.
__device__ __forceinline__ void MmaE4M3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                        uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void PrefetchL1(const float* ptr) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(ptr));
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
// A group of KS warps owns RT tiles of 16 rows; warp `part` reads the chunk
// slice [part, part + 1) * kvec / KS, U steps of 4 chunks in flight per tile
// row. Weights are prefetched before waiting for the previous kernel.
template <int RT, int U, int KS, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) GemvFp8Kernel(const __grid_constant__ GemvFp8Params p) {
  static_assert(WARPS % KS == 0, "K split must divide the block");
  __shared__ float partial[KS > 1 ? WARPS : 1][RT * 4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int part = warp % KS;
  const int row0 = (blockIdx.x * (WARPS / KS) + warp / KS) * (RT * 16);
  const int kvec = p.k / 16;
  const int beg = static_cast<int>(static_cast<int64_t>(kvec) * part / KS);
  const int end = static_cast<int>(static_cast<int64_t>(kvec) * (part + 1) / KS);

  const uint4* w[RT][2];
#pragma unroll
  for (int r = 0; r < RT; ++r) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = min(row0 + r * 16 + h * 8 + g, p.n - 1);  // rows past n: never stored
      w[r][h] = reinterpret_cast<const uint4*>(p.w + static_cast<size_t>(row) * p.k);
    }
  }
  const bool has_x = g < p.batch;
  const uint4* x = reinterpret_cast<const uint4*>(p.x + static_cast<size_t>(has_x ? g : 0) * p.k);

  float acc[RT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[r][i] = 0.0f;

  uint4 wv[U][RT][2];
  auto load = [&](int base) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + 4 * u + t;
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) wv[u][r][h] = c < end ? LoadStream(w[r][h] + c) : make_uint4(0, 0, 0, 0);
    }
  };

  // The epilogue's scales are pulled into L1 up front (no registers held):
  // a dependent DRAM miss after the stream would add its latency to every
  // GEMV's tail. Token scales are written by the previous kernel: after waiting.
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) PrefetchL1(p.w_scale + min(row0 + r * 16 + h * 8 + g, p.n - 1));

  int base = beg;
  load(base);
  WaitForPreviousKernel();
  PrefetchL1(p.x_scale + min(2 * t, p.batch - 1));
  while (base < end) {
    uint4 xv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + 4 * u + t;
      xv[u] = has_x && c < end ? __ldg(x + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        const uint4& a = wv[u][r][0];
        const uint4& b = wv[u][r][1];
        MmaE4M3(acc[r], a.x, b.x, a.y, b.y, xv[u].x, xv[u].y);
        MmaE4M3(acc[r], a.z, b.z, a.w, b.w, xv[u].z, xv[u].w);
      }
    }
    base += 4 * U;
    if (base < end) load(base);
  }

  if constexpr (KS > 1) {
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][r * 4 + i][lane] = acc[r][i];
    __syncthreads();
    if (part != 0) return;
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

  // Accumulator i of tile r: row row0 + 16 r + g + 8 (i / 2), batch row 2 t + (i % 2).
#pragma unroll
  for (int r = 0; r < RT; ++r) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + r * 16 + g + 8 * (i / 2);
      const int b = 2 * t + (i % 2);
      if (row >= p.n || b >= p.batch) continue;
      const size_t o = static_cast<size_t>(b) * p.n + row;
      const float v = acc[r][i] * p.w_scale[row] * p.x_scale[b];
      if (p.out_f32) {
        p.out_f32[o] = p.softcap > 0.0f ? p.softcap * tanhf(v / p.softcap) : v;
      } else {
        p.out_bf16[o] = __float2bfloat16(v);
      }
    }
  }
}

template <int RT, int U, int KS, int WARPS>
void Launch(const GemvFp8Params& p, cudaStream_t stream) {
  const int rows_per_block = (WARPS / KS) * RT * 16;
  LaunchWithPdl(GemvFp8Kernel<RT, U, KS, WARPS>, dim3((p.n + rows_per_block - 1) / rows_per_block),
                dim3(WARPS * 32), 0, stream, p);
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
    // GEMV's whole stream in flight in one wave (issue 8 round 2). 512-thread
    // blocks get at most 128 registers: u8 and t2u4 spill there, so not listed.
    {"t1u16k4", Launch<1, 16, 4, 4>},    {"t1u16k8", Launch<1, 16, 8, 8>},
    {"t2u8k4", Launch<2, 8, 4, 4>},      {"t1u8k2w8", Launch<1, 8, 2, 8>},
    {"t1u8k4w8", Launch<1, 8, 4, 8>},    {"t1u4k16", Launch<1, 4, 16, 16>},
    {"t2u2k16", Launch<2, 2, 16, 16>},
};
constexpr int kNumTilings = sizeof(kTilings) / sizeof(kTilings[0]);
// Same default as the bf16 tensor-core GEMV (t1u8k4); autotuning may pick others.
constexpr int kDefaultTiling = 7;

}  // namespace

int NumGemvFp8Variants() { return kNumTilings; }

const char* GemvFp8VariantName(int variant) {
  return variant >= 0 && variant < kNumTilings ? kTilings[variant].name : "default";
}

std::string LaunchGemvFp8(const GemvFp8Params& p, cudaStream_t stream) {
  if (!p.w || !p.w_scale || !p.x || !p.x_scale) return "gemv_fp8: null input";
  if ((p.out_bf16 == nullptr) == (p.out_f32 == nullptr)) return "gemv_fp8: need exactly one output";
  if (p.n <= 0 || p.k <= 0 || p.k % 16 != 0) return "gemv_fp8: need n >= 1 and k a positive multiple of 16";
  if (p.batch < 1 || p.batch > kGemvMaxBatch) return "gemv_fp8: batch must be 1..8";
  if (p.softcap > 0.0f && !p.out_f32) return "gemv_fp8: softcap needs fp32 output";
  if (p.variant < -1 || p.variant >= kNumTilings) return "gemv_fp8: unknown variant";
  kTilings[p.variant < 0 ? kDefaultTiling : p.variant].launch(p, stream);
  return LaunchError("gemv_fp8");
}

}  // namespace gemma::kernels
