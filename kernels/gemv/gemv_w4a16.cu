#include "kernels/gemv/gemv_w4a16.h"

#include <algorithm>
#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/stream_load.cuh"

namespace gemma::kernels {
namespace {

// Codes p and p + 4 of a word (elements 2p and 2p+1 of its 8, by the layout)
// as bf16x2 values u - 8, exactly: 0x4300 | u is 128 + u in bf16.
__device__ __forceinline__ uint32_t CodePairToBf16x2(uint32_t word, int p) {
  const uint32_t biased = ((word >> (4 * p)) & 0x000F000Fu) | 0x43004300u;
  __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&biased);
  const __nv_bfloat162_raw offset_raw{0x4308, 0x4308};  // 136
  v = __hsub2(v, __nv_bfloat162(offset_raw));
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The same codes as 128 + u (no subtraction): the "b-" tilings take the bias
// out of the products with an MMA of -136 against x (row-independent) as the
// accumulator's initial value: sum (128 + u) x - 136 sum x = sum (u - 8) x.
__device__ __forceinline__ uint32_t CodePairBiased(uint32_t word, int p) {
  return ((word >> (4 * p)) & 0x000F000Fu) | 0x43004300u;
}

// d = a * b + c with d and c distinct (no copy of c into d first).
__device__ __forceinline__ void MmaBf16From(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                            uint32_t b0, uint32_t b1, const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

__device__ __forceinline__ float HalfBits(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xFFFFu)));
}

// Accumulator i of tile r: row row0 + 16 r + g + 8 (i / 2), batch row 2 t + (i % 2).
template <int RT>
__device__ __forceinline__ void StoreTile(const GemvW4Params& p, const float (&acc)[RT][4], int row0, int g, int t) {
#pragma unroll
  for (int r = 0; r < RT; ++r) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + r * 16 + g + 8 * (i / 2);
      const int b = 2 * t + (i % 2);
      if (row >= p.n || b >= p.batch) continue;
      const size_t o = static_cast<size_t>(b) * p.n + row;
      const float v = acc[r][i];
      if (p.out_f32) {
        p.out_f32[o] = p.softcap > 0.0f ? p.softcap * tanhf(v / p.softcap) : v;
      } else {
        p.out_bf16[o] = __float2bfloat16(v);
      }
    }
  }
}

// GS: group size (32 or 128). A group of KS warps owns RT tiles of 16 rows and
// splits the row's super-chunks (128 k) evenly; a step covers U super-chunks.
// Lane (g, t) reads lane-chunk t of each super-chunk of rows g and g + 8, its
// rows' scales for those groups (shared by the quad: L1), and the x values
// its four words multiply: 128 s + 32 w + 8 t .. + 7 of x row g.
// PIPE keeps two register stages so a lane's next loads fly during its MMAs.
// Persistent launches give every resident block the same number of tiles.
template <int GS, int RT, int U, int KS, int WARPS, bool PIPE, bool BIAS, bool XLATE>
__global__ void __launch_bounds__(WARPS * 32) GemvW4Kernel(const __grid_constant__ GemvW4Params p) {
  static_assert(WARPS % KS == 0, "K split must divide the block");
  static_assert(GS == 32 || GS == 128, "group 32 or 128");
  constexpr int kRowsPerBlock = (WARPS / KS) * RT * 16;
  constexpr int kStages = PIPE ? 2 : 1;
  constexpr int kScaleWords = GS == 32 ? 2 : 1;  // 4 fp16 scales, or 1
  __shared__ float partial[KS > 1 ? WARPS : 1][RT * 4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int part = warp % KS;
  const int kpad = W4PaddedK(p.k);
  const int supers = kpad / 128;
  const int beg = supers * part / KS;
  const int end = supers * (part + 1) / KS;
  const int scales_per_row = kpad / GS;
  const bool has_x = g < p.batch;
  const __nv_bfloat16* x = p.x + static_cast<size_t>(has_x ? g : 0) * p.k;
  const int num_block_tiles = (p.n + kRowsPerBlock - 1) / kRowsPerBlock;

  const uint4* w[RT][2];
  const __half* sc[RT][2];
  auto set_tile = [&](int bt) {
    const int row0 = bt * kRowsPerBlock + (warp / KS) * (RT * 16);
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = min(row0 + r * 16 + h * 8 + g, p.n - 1);  // rows past n: never stored
        w[r][h] = reinterpret_cast<const uint4*>(p.w + static_cast<size_t>(row) * (kpad / 2));
        sc[r][h] = p.scales + static_cast<size_t>(row) * scales_per_row;
      }
    }
  };
  uint4 wv[kStages][U][RT][2];
  uint32_t sv[kStages][U][RT][2][kScaleWords];
  // XLATE ("x-" tilings): x is loaded just before the step that multiplies
  // it (one register stage; it hits L1/L2), so the registers go to weights in flight.
  constexpr int kXStages = XLATE ? 1 : kStages;
  uint4 xv[kXStages][U][4];
  auto load = [&](int s, int base) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + u;
#pragma unroll
      for (int r = 0; r < RT; ++r) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          wv[s][u][r][h] = c < end ? LoadStream(w[r][h] + 4 * c + t) : make_uint4(0, 0, 0, 0);
          if constexpr (GS == 32) {
            const uint2 s4 = c < end ? __ldg(reinterpret_cast<const uint2*>(sc[r][h] + 4 * c)) : make_uint2(0, 0);
            sv[s][u][r][h][0] = s4.x;
            sv[s][u][r][h][1] = s4.y;
          } else {
            sv[s][u][r][h][0] = c < end ? __half_as_ushort(sc[r][h][c]) : 0u;
          }
        }
      }
    }
  };
  auto load_x = [&](int s, int base) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + u;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int k0 = 128 * c + 32 * q + 8 * t;
        xv[s][u][q] = has_x && c < end && k0 < p.k ? __ldg(reinterpret_cast<const uint4*>(x + k0))
                                                     : make_uint4(0, 0, 0, 0);
      }
    }
  };
  auto scale_of = [&](int s, int u, int r, int h, int q) {
    return GS == 32 ? HalfBits(sv[s][u][r][h][q / 2] >> (16 * (q % 2))) : HalfBits(sv[s][u][r][h][0]);
  };
  auto add_scaled = [&](float (&acc)[4], const float (&part)[4], float sa, float sb) {
    acc[0] += sa * part[0];
    acc[1] += sa * part[1];
    acc[2] += sb * part[2];
    acc[3] += sb * part[3];
  };
  auto multiply = [&](int s, float (&acc)[RT][4]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if constexpr (BIAS) {
        constexpr uint32_t kMinus136 = 0xC308C308u;  // bf16x2 (-136, -136)
        const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        float neg[4];  // -136 * (sum of x over the group(s) so far), per (row, batch) slot
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const uint4& xq = xv[XLATE ? 0 : s][u][q];
          if (GS == 32 || q == 0) {
            MmaBf16From(neg, kMinus136, kMinus136, kMinus136, kMinus136, xq.x, xq.y, zero);
          } else {
            MmaBf16From(neg, kMinus136, kMinus136, kMinus136, kMinus136, xq.x, xq.y, neg);
          }
          MmaBf16(neg, kMinus136, kMinus136, kMinus136, kMinus136, xq.z, xq.w);
          if constexpr (GS == 32) {
#pragma unroll
            for (int r = 0; r < RT; ++r) {
              const uint4& a = wv[s][u][r][0];
              const uint4& b = wv[s][u][r][1];
              const uint32_t aw = (&a.x)[q], bw = (&b.x)[q];
              float part[4];
              MmaBf16From(part, CodePairBiased(aw, 0), CodePairBiased(bw, 0), CodePairBiased(aw, 1),
                          CodePairBiased(bw, 1), xq.x, xq.y, neg);
              MmaBf16(part, CodePairBiased(aw, 2), CodePairBiased(bw, 2), CodePairBiased(aw, 3),
                      CodePairBiased(bw, 3), xq.z, xq.w);
              add_scaled(acc[r], part, scale_of(s, u, r, 0, q), scale_of(s, u, r, 1, q));
            }
          }
        }
        if constexpr (GS == 128) {
#pragma unroll
          for (int r = 0; r < RT; ++r) {
            const uint4& a = wv[s][u][r][0];
            const uint4& b = wv[s][u][r][1];
            float part[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              const uint4& xq = xv[XLATE ? 0 : s][u][q];
              const uint32_t aw = (&a.x)[q], bw = (&b.x)[q];
              if (q == 0) {
                MmaBf16From(part, CodePairBiased(aw, 0), CodePairBiased(bw, 0), CodePairBiased(aw, 1),
                            CodePairBiased(bw, 1), xq.x, xq.y, neg);
              } else {
                MmaBf16(part, CodePairBiased(aw, 0), CodePairBiased(bw, 0), CodePairBiased(aw, 1),
                        CodePairBiased(bw, 1), xq.x, xq.y);
              }
              MmaBf16(part, CodePairBiased(aw, 2), CodePairBiased(bw, 2), CodePairBiased(aw, 3),
                      CodePairBiased(bw, 3), xq.z, xq.w);
            }
            add_scaled(acc[r], part, scale_of(s, u, r, 0, 0), scale_of(s, u, r, 1, 0));
          }
        }
      } else {
#pragma unroll
        for (int r = 0; r < RT; ++r) {
          const uint4& a = wv[s][u][r][0];
          const uint4& b = wv[s][u][r][1];
          const uint32_t aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
          float part_acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int q = 0; q < 4; ++q) {  // word q: 32-group 4 c + q
            const uint4& xq = xv[XLATE ? 0 : s][u][q];
            if constexpr (GS == 32) {
#pragma unroll
              for (int i = 0; i < 4; ++i) part_acc[i] = 0.0f;
            }
            MmaBf16(part_acc, CodePairToBf16x2(aw[q], 0), CodePairToBf16x2(bw[q], 0), CodePairToBf16x2(aw[q], 1),
                    CodePairToBf16x2(bw[q], 1), xq.x, xq.y);
            MmaBf16(part_acc, CodePairToBf16x2(aw[q], 2), CodePairToBf16x2(bw[q], 2), CodePairToBf16x2(aw[q], 3),
                    CodePairToBf16x2(bw[q], 3), xq.z, xq.w);
            if constexpr (GS == 32) add_scaled(acc[r], part_acc, scale_of(s, u, r, 0, q), scale_of(s, u, r, 1, q));
          }
          if constexpr (GS == 128) add_scaled(acc[r], part_acc, scale_of(s, u, r, 0, 0), scale_of(s, u, r, 1, 0));
        }
      }
    }
  };

  if (static_cast<int>(blockIdx.x) >= num_block_tiles) {  // block-uniform; never with Launch's grids
    WaitForPreviousKernel();
    return;
  }
  set_tile(blockIdx.x);
  load(0, beg);  // weights and scales do not depend on the previous kernel
  for (int bt = blockIdx.x; bt < num_block_tiles; bt += gridDim.x) {
    const int row0 = bt * kRowsPerBlock + (warp / KS) * (RT * 16);
    float acc[RT][4];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][i] = 0.0f;

    WaitForPreviousKernel();  // returns at once after the first tile
    AllowDependentLaunch();
    if constexpr (PIPE) {
      if (!XLATE) load_x(0, beg);
      for (int base = beg; base < end;) {
        if (base + U < end) {
          load(1, base + U);
          if (!XLATE) load_x(1, base + U);
        }
        if (XLATE) load_x(0, base);
        multiply(0, acc);
        base += U;
        if (base >= end) break;
        if (base + U < end) {
          load(0, base + U);
          if (!XLATE) load_x(0, base + U);
        }
        if (XLATE) load_x(0, base);
        multiply(1, acc);
        base += U;
      }
    } else {
      for (int base = beg; base < end;) {
        load_x(0, base);
        multiply(0, acc);
        base += U;
        if (base < end) load(0, base);
      }
    }
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
      __syncthreads();
    }
    if (part == 0) StoreTile<RT>(p, acc, row0, g, t);
  }
}

template <int GS, int RT, int U, int KS, int WARPS, bool persistent, bool PIPE, bool BIAS, bool XLATE>
void Launch(const GemvW4Params& p, cudaStream_t stream) {
  const auto kernel = GemvW4Kernel<GS, RT, U, KS, WARPS, PIPE, BIAS, XLATE>;
  const int rows_per_block = (WARPS / KS) * RT * 16;
  const int tiles = (p.n + rows_per_block - 1) / rows_per_block;
  int blocks = tiles;
  if constexpr (persistent) {
    static const int resident = [kernel] {
      int device = 0, sms = 0, per_sm = 0;
      cudaGetDevice(&device);
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, WARPS * 32, 0);
      return std::max(1, sms * per_sm);
    }();
    const int rounds = (tiles + resident - 1) / resident;
    blocks = (tiles + rounds - 1) / rounds;
  }
  LaunchWithPdl(kernel, dim3(blocks), dim3(WARPS * 32), 0, stream, p);
}

// One tiling for both group sizes.
template <int RT, int U, int KS, int WARPS, bool persistent = false, bool PIPE = false, bool BIAS = false,
          bool XLATE = false>
void LaunchAnyGroup(const GemvW4Params& p, cudaStream_t stream) {
  if (p.group == 32) {
    Launch<32, RT, U, KS, WARPS, persistent, PIPE, BIAS, XLATE>(p, stream);
  } else {
    Launch<128, RT, U, KS, WARPS, persistent, PIPE, BIAS, XLATE>(p, stream);
  }
}

// t<16-row tiles per warp>u<128-k steps in flight>k<warps splitting K>,
// w<warps per block> where it differs from 4 (or from k when k > 4); p- persistent, q- pipelined.
struct Tiling {
  const char* name;
  void (*launch)(const GemvW4Params&, cudaStream_t);
};
constexpr Tiling kTilings[] = {
    {"t1u2", LaunchAnyGroup<1, 2, 1, 4>},
    {"t1u2k4", LaunchAnyGroup<1, 2, 4, 4>},
    {"t1u4k4", LaunchAnyGroup<1, 4, 4, 4>},
    {"t2u2k4", LaunchAnyGroup<2, 2, 4, 4>},
    {"t1u2k8", LaunchAnyGroup<1, 2, 8, 8>},
    {"t1u1k16", LaunchAnyGroup<1, 1, 16, 16>},
    {"p-t1u2k4", LaunchAnyGroup<1, 2, 4, 4, true>},
    {"q-t1u1k4", LaunchAnyGroup<1, 1, 4, 4, false, true>},
    {"q-t1u2k4", LaunchAnyGroup<1, 2, 4, 4, false, true>},
    {"q-t1u1k8", LaunchAnyGroup<1, 1, 8, 8, false, true>},
    {"p-q-t1u2k4", LaunchAnyGroup<1, 2, 4, 4, true, true>},
    // b-: the bias taken out by an MMA of -136 against x (no subtraction per code pair).
    {"b-t1u2k4", LaunchAnyGroup<1, 2, 4, 4, false, false, true>},
    {"b-t2u2k4", LaunchAnyGroup<2, 2, 4, 4, false, false, true>},
    {"b-t1u4k4", LaunchAnyGroup<1, 4, 4, 4, false, false, true>},
    {"b-q-t1u2k4", LaunchAnyGroup<1, 2, 4, 4, false, true, true>},
    {"b-q-t1u1k8", LaunchAnyGroup<1, 1, 8, 8, false, true, true>},
    {"b-p-q-t1u2k4", LaunchAnyGroup<1, 2, 4, 4, true, true, true>},
    {"b-q-t2u1k4", LaunchAnyGroup<2, 1, 4, 4, false, true, true>},
    {"b-p-t1u2k4", LaunchAnyGroup<1, 2, 4, 4, true, false, true>},
    // x-: x loaded late (not pipelined): more weight bytes in flight per lane.
    {"x-q-t1u4k4", LaunchAnyGroup<1, 4, 4, 4, false, true, false, true>},
    {"x-q-t1u2k4", LaunchAnyGroup<1, 2, 4, 4, false, true, false, true>},
    {"x-p-q-t1u4k4", LaunchAnyGroup<1, 4, 4, 4, true, true, false, true>},
    {"x-q-t1u4k8", LaunchAnyGroup<1, 4, 8, 8, false, true, false, true>},
    {"x-q-t2u2k4", LaunchAnyGroup<2, 2, 4, 4, false, true, false, true>},
    {"x-b-q-t1u4k4", LaunchAnyGroup<1, 4, 4, 4, false, true, true, true>},
    {"x-b-p-q-t1u4k4", LaunchAnyGroup<1, 4, 4, 4, true, true, true, true>},
};
constexpr int kNumTilings = sizeof(kTilings) / sizeof(kTilings[0]);
constexpr int kDefaultTiling = 1;

}  // namespace

int NumGemvW4Variants() { return kNumTilings; }

const char* GemvW4VariantName(int variant) {
  return variant >= 0 && variant < kNumTilings ? kTilings[variant].name : "default";
}

std::string LaunchGemvW4(const GemvW4Params& p, cudaStream_t stream) {
  if (!p.w || !p.scales || !p.x) return "gemv_w4a16: null weights, scales or input";
  if ((p.out_bf16 == nullptr) == (p.out_f32 == nullptr)) return "gemv_w4a16: need exactly one output";
  if (p.n <= 0 || p.k <= 0 || p.k % 32 != 0) return "gemv_w4a16: need n >= 1 and k a positive multiple of 32";
  if (p.group != 32 && p.group != 128) return "gemv_w4a16: group must be 32 or 128";
  if (p.batch < 1 || p.batch > kW4MaxBatch) return "gemv_w4a16: batch must be 1..8";
  if (p.softcap > 0.0f && !p.out_f32) return "gemv_w4a16: softcap needs fp32 output";
  if (p.variant < -1 || p.variant >= kNumTilings) return "gemv_w4a16: unknown variant";
  kTilings[p.variant < 0 ? kDefaultTiling : p.variant].launch(p, stream);
  return LaunchError("gemv_w4a16");
}

}  // namespace gemma::kernels
