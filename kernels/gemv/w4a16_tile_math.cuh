// Device helpers the W4A16 kernels share (gemv_w4a16.cu, w4a16_chain.cu):
// a lane's code pairs as bf16 MMA fragments, one 32-group of a 16-row tile
// against x fragments, the K-split reduction through shared memory, the
// stores of a tile's accumulators (plain, paired, gelu gate) and the staged-x
// fragment reads. The tiled layout is kernels/quant/w4_layout.h's.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/mma.cuh"
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

// d = a * b + c with d and c distinct (c: zeros, so partials need no reset).
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

// One 32-group (word q of every lane-chunk) of a super-chunk: RT tiles' codes
// (wv[r][h]: rows g + 8h) and scales (sv[r], the quad's 16 bytes at 8 g + 4 h + q)
// against the x fragments xb[j] (16 bytes of x row 8 j + g, columns 8t..8t+7 of
// the group), into zeroed partials scaled into acc.
// FOLD: the codes stay biased (128 + u) and init[j] holds -136 * sum(x) of
// the group for the lane's accumulator columns, so the partial starts from it
// instead of zero: the same sum, two operations fewer per code pair.
template <int RT, int NT, bool FOLD = false>
__device__ __forceinline__ void MultiplyGroup(float (&acc)[RT][NT][4], const uint4 (&wv)[RT][2], const uint4 (&sv)[RT],
                                              const uint4 (&xb)[NT], int q, const float (*init)[4] = nullptr) {
  const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  auto code_pair = [](uint32_t word, int p) { return FOLD ? BiasedCodePair(word, p) : CodePairToBf16x2(word, p); };
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const uint32_t aw = (&wv[r][0].x)[q], bw = (&wv[r][1].x)[q];
    const uint32_t a0 = code_pair(aw, 0), a1 = code_pair(bw, 0);
    const uint32_t a2 = code_pair(aw, 1), a3 = code_pair(bw, 1);
    const uint32_t a4 = code_pair(aw, 2), a5 = code_pair(bw, 2);
    const uint32_t a6 = code_pair(aw, 3), a7 = code_pair(bw, 3);
    const uint32_t* sw = &sv[r].x;
    const float sa = HalfBits(sw[q / 2] >> (16 * (q % 2)));
    const float sb = HalfBits(sw[2 + q / 2] >> (16 * (q % 2)));
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      float part_acc[4];
      MmaBf16From(part_acc, a0, a1, a2, a3, xb[j].x, xb[j].y, FOLD ? init[j] : zero);
      MmaBf16(part_acc, a4, a5, a6, a7, xb[j].z, xb[j].w);
      acc[r][j][0] += sa * part_acc[0];
      acc[r][j][1] += sa * part_acc[1];
      acc[r][j][2] += sb * part_acc[2];
      acc[r][j][3] += sb * part_acc[3];
    }
  }
}

// K split inside a block: the warps of parts 1..KS-1 hand their accumulators
// to part 0's warp (warp - part) through `partial`; the barriers are
// block-uniform. On return `partial` may be reused.
template <int RT, int NT, int KS, int WARPS>
__device__ __forceinline__ void ReduceParts(float (&acc)[RT][NT][4], float (&partial)[WARPS][RT * NT * 4][32],
                                            int warp, int part, int lane) {
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][(r * NT + j) * 4 + i][lane] = acc[r][j][i];
  __syncthreads();
  if (part == 0) {
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float v = acc[r][j][i];
#pragma unroll
          for (int q = 1; q < KS; ++q) v += partial[warp + q][(r * NT + j) * 4 + i][lane];
          acc[r][j][i] = v;
        }
  }
  __syncthreads();
}

// Lane (g, t)'s x fragment of n8 tile j, super-chunk c, 32-group word q, and
// its partials' starting values for that group (MultiplyGroup's FOLD).
__device__ __forceinline__ uint4 StagedXFragment(const GemvW4Params& p, const uint4* x_stage, int j, int c, int q,
                                                 int g, int t) {
  const int row = 8 * j + g < p.batch ? 8 * j + g : 0;  // columns past the batch are never stored
  return x_stage[row * (W4PaddedK(p.k) / 8) + ((16 * c + 4 * q + t) ^ ((row & 1) << 2))];
}
template <int NT>
__device__ __forceinline__ void StagedGroupInit(const float* group_sums, int group, int t, float (&init)[NT][4]) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const float2 v = *reinterpret_cast<const float2*>(group_sums + group * 8 * NT + 8 * j + 2 * t);
    init[j][0] = init[j][2] = v.x;
    init[j][1] = init[j][3] = v.y;
  }
}

}  // namespace gemma::kernels::w4
