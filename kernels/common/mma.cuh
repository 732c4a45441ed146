// The bf16 tensor-core MMA every tiled kernel here issues (attention tiles,
// the batch GEMVs, the FP8 GEMVs' bf16 path), written once.
#pragma once

#include <cstdint>

namespace gemma::kernels {

// d += a (16x16 bf16, row) * b (16x8 bf16, col), fp32 accumulators
// (mma.sync m16n8k16; a0..a3 and b0, b1 in the PTX fragment layout).
__device__ __forceinline__ void MmaBf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                        uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace gemma::kernels
