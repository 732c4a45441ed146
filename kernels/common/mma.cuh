// The tensor-core MMAs every tiled kernel here issues (attention tiles, the
// batch GEMVs, the FP8 GEMVs), written once: d += a (row) * b (col) with fp32
// accumulators, a0..a3 and b0, b1 in the PTX fragment layout of mma.sync.
#pragma once

#include <cstdint>

namespace gemma::kernels {

// The wrappers differ only in the instruction's shape and operand types.
#define GEMMA_DEFINE_MMA(NAME, SHAPE_AND_TYPES)                                                             \
  __device__ __forceinline__ void NAME(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, \
                                       uint32_t b0, uint32_t b1) {                                        \
    asm volatile("mma.sync.aligned." SHAPE_AND_TYPES                                                      \
                 " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"                       \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                         \
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));                                 \
  }

// 16x16 bf16 times 16x8 bf16.
GEMMA_DEFINE_MMA(MmaBf16, "m16n8k16.row.col.f32.bf16.bf16.f32")
// 16x16 f16 times 16x8 f16 (the E4M3-cache attention path: E4M3 widens to
// f16 in one instruction, to bf16 only through fp32).
GEMMA_DEFINE_MMA(MmaF16, "m16n8k16.row.col.f32.f16.f16.f32")
// 16x32 E4M3 times 32x8 E4M3.
GEMMA_DEFINE_MMA(MmaE4M3, "m16n8k32.row.col.f32.e4m3.e4m3.f32")

#undef GEMMA_DEFINE_MMA

}  // namespace gemma::kernels
