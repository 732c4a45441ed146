// Device pieces shared by the W4A16 kernels (gemv_w4a16.cu's mma.sync
// tilings and w4a16_wgmma.cu's wgmma ones): code pairs as bf16, fp16 scale
// bits, the gelu gate and the store of a 16-row tile's accumulators.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/gemv/gemv_w4a16.h"

namespace gemma::kernels::w4 {

// Codes p and p + 4 of a word (elements 2p and 2p+1 of its 8, by the layout)
// as bf16x2 values 128 + u, exactly: 0x4300 | u is 128 + u in bf16 (one lop3).
__device__ __forceinline__ uint32_t BiasedCodePair(uint32_t word, int p) {
  uint32_t biased;
  asm("lop3.b32 %0, %1, 0x000f000f, 0x43004300, 0xea;" : "=r"(biased) : "r"(word >> (4 * p)));
  return biased;
}
// The same pair as u - 8 (minus 136).
__device__ __forceinline__ uint32_t CodePairToBf16x2(uint32_t word, int p) {
  const uint32_t biased = BiasedCodePair(word, p);
  __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&biased);
  const __nv_bfloat162_raw offset_raw{0x4308, 0x4308};  // 136
  v = __hsub2(v, __nv_bfloat162(offset_raw));
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ float HalfBits(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xFFFFu)));
}

__device__ __forceinline__ float GeluTanh(float x) {
  const float kAlpha = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(kAlpha * (x + 0.044715f * x * x * x)));
}

// Accumulator i of (tile r, n8 tile j): tiled row 16 (tile0 + r) + g + 8 (i / 2),
// batch row 8 j + 2 t + (i % 2). Rows of tiles past the matrix are >= n. A
// paired tiling's tiled rows map back to the matrix's (W4PairedRow), or with
// gelu_gate accumulators i and i + 2 are the gate and up sums of one output.
template <int RT, int NT>
__device__ __forceinline__ void StoreTiles(const GemvW4Params& p, const float (&acc)[RT][NT][4], int tile0, int g,
                                           int t) {
  if (p.gelu_gate) {
    const int half = p.n / 2;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const int col = (tile0 + r) * 8 + g;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int b = 8 * j + 2 * t + i;
          if (col >= half || b >= p.batch) continue;
          p.out_bf16[static_cast<size_t>(b) * half + col] = __float2bfloat16(GeluTanh(acc[r][j][i]) * acc[r][j][i + 2]);
        }
      }
    }
    return;
  }
#pragma unroll
  for (int r = 0; r < RT; ++r) {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int tiled = (tile0 + r) * 16 + g + 8 * (i / 2);
        const int b = 8 * j + 2 * t + (i % 2);
        if (tiled >= p.n || b >= p.batch) continue;
        const int row = p.paired ? static_cast<int>(W4PairedRow(tiled, p.n)) : tiled;
        const size_t o = static_cast<size_t>(b) * p.n + row;
        const float v = acc[r][j][i];
        if (p.out_f32) {
          p.out_f32[o] = p.softcap > 0.0f ? p.softcap * tanhf(v / p.softcap) : v;
        } else {
          p.out_bf16[o] = __float2bfloat16(v);
        }
      }
    }
  }
}

}  // namespace gemma::kernels::w4
