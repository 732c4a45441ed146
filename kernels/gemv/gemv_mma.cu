#include "kernels/gemv/gemv_mma.h"

#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/stream_load.cuh"

namespace gemma::kernels::internal {
namespace {

// Fragment mapping. Lane = 4 g + t. The m16n8k16 fragments give lane (g, t)
// the k slots {2t, 2t+1, 2t+8, 2t+9} of A rows g and g+8 and of B column g.
// A dot product may visit k in any order as long as A and B agree, so slot
// pairs are bound to memory per t: lane (g, t) loads the 16-byte chunk c(t)
// (8 consecutive k) of weight rows g and g+8 and of x row g, and the chunk's
// 4 bf16 pairs .x .y .z .w become slots (2t, 2t+8) of one MMA and (2t, 2t+8)
// of a second. A warp step thus covers 16 rows x 4 chunks (32 k, 2 MMAs) with
// 2 weight loads per lane; B column g is batch row g (zero for g >= batch).
//
// A group of KS warps owns RT tiles of 16 rows; warp `part` reads the chunk
// slice [part, part + 1) * kvec / KS, U steps of 4 chunks in flight per tile
// row before any is used. The first loads are issued before waiting for the
// previous kernel (weights do not depend on it).
template <int RT, int U, int KS, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) GemvMmaKernel(const __grid_constant__ GemvParams p) {
  static_assert(WARPS % KS == 0, "K split must divide the block");
  __shared__ float partial[KS > 1 ? WARPS : 1][RT * 4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int part = warp % KS;
  const int row0 = (blockIdx.x * (WARPS / KS) + warp / KS) * (RT * 16);
  const int kvec = p.k / 8;
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

  int base = beg;
  load(base);
  WaitForPreviousKernel();
  // A PDL-launched successor (the residual norm) may now launch and load its
  // weights during this kernel.
  AllowDependentLaunch();
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
        MmaBf16(acc[r], a.x, b.x, a.y, b.y, xv[u].x, xv[u].y);
        MmaBf16(acc[r], a.z, b.z, a.w, b.w, xv[u].z, xv[u].w);
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
      const float v = acc[r][i];
      if (p.out_f32) {
        p.out_f32[o] = p.softcap > 0.0f ? p.softcap * tanhf(v / p.softcap) : v;
      } else {
        p.out_bf16[o] = __float2bfloat16(v);
      }
    }
  }
}

template <int RT, int U, int KS, int WARPS>
void Launch(const GemvParams& p, cudaStream_t stream) {
  const int rows_per_block = (WARPS / KS) * RT * 16;
  LaunchWithPdl(GemvMmaKernel<RT, U, KS, WARPS>, dim3((p.n + rows_per_block - 1) / rows_per_block),
                dim3(WARPS * 32), 0, stream, p);
}

// t<16-row tiles per warp>u<4-chunk steps in flight>k<warps splitting K>
// (Order fixed: kGemvMmaDefaultTiling indexes it.)
constexpr const char* kNames[] = {"t1u4",   "t1u8",   "t2u4",   "t4u2",   "t1u4k2", "t1u8k2",
                                  "t1u4k4", "t1u8k4", "t2u4k4", "t1u4k8", "t1u8k8", "t2u4k8"};
static_assert(kNames[kGemvMmaDefaultTiling][2] == 'u' && kNames[kGemvMmaDefaultTiling][5] == '4');
constexpr int kNumTilings = sizeof(kNames) / sizeof(kNames[0]);

}  // namespace

int NumGemvMmaTilings() { return kNumTilings; }

const char* GemvMmaTilingName(int tiling) {
  return tiling >= 0 && tiling < kNumTilings ? kNames[tiling] : "?";
}

void LaunchGemvMma(const GemvParams& p, int tiling, cudaStream_t stream) {
  switch (tiling) {
    case 0: return Launch<1, 4, 1, 4>(p, stream);
    case 1: return Launch<1, 8, 1, 4>(p, stream);
    case 2: return Launch<2, 4, 1, 4>(p, stream);
    case 3: return Launch<4, 2, 1, 4>(p, stream);
    case 4: return Launch<1, 4, 2, 4>(p, stream);
    case 5: return Launch<1, 8, 2, 4>(p, stream);
    case 6: return Launch<1, 4, 4, 4>(p, stream);
    case 7: return Launch<1, 8, 4, 4>(p, stream);
    case 8: return Launch<2, 4, 4, 4>(p, stream);
    case 9: return Launch<1, 4, 8, 8>(p, stream);
    case 10: return Launch<1, 8, 8, 8>(p, stream);
    default: return Launch<2, 4, 8, 8>(p, stream);
  }
}

}  // namespace gemma::kernels::internal
