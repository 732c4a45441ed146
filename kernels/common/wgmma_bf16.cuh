// Hopper (sm_90a) bf16 and f16 warpgroup MMAs: m64nNk16 with both operands in shared
// memory (K-major, 128-byte swizzle: SmemDescSw128 in wgmma.cuh) and with A
// from registers and an MN-major B (SmemDescSw128Mn), plus the
// shared-memory fences and barriers a warp-specialized kernel needs
// between its cp.async producer and its wgmma consumers.
//
// Register fragments (PTX ISA 9.7.15.5.1.1): the accumulator of m64nN is the
// mma.sync m16n8 C layout repeated N / 8 times per warp (warp w of the
// warpgroup: rows 16 w .. 16 w + 15; register 4 i + 2 h + j holds row
// g + 8 h, column 8 i + 2 t + j, lane = 4 g + t); the A fragment of k16 is
// the mma.sync m16n8k16 A layout (a0: row g, k 2t..2t+1; a1: row g + 8;
// a2, a3: k + 8).
#pragma once

#include <cstdint>

#include "kernels/common/wgmma.cuh"

namespace gemma::kernels {

// The descriptor of an MN-major, 128-byte-swizzled operand (PTX ISA
// 9.7.15.5.1.2, canonical layout ((8 x 16 B, m), (8 rows, k)) : ((1, LBO),
// (128 B, SBO))): every 128-byte row holds 64 consecutive bf16 of N for one
// k; 8 such rows form a 1024-byte swizzle atom (SBO = 1024 B to the next 8
// k), and the next 64 N start `mn_stride_bytes` further on (LBO).
__device__ __forceinline__ uint64_t SmemDescSw128Mn(uint32_t addr, uint32_t mn_stride_bytes) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((addr & 0x3FFFFu) >> 4);
  d |= static_cast<uint64_t>((mn_stride_bytes >> 4) & 0x3FFFu) << 16;
  d |= static_cast<uint64_t>(kSwizzleAtom >> 4) << 32;
  d |= static_cast<uint64_t>(1) << 62;
  return d;
}

// Orders this thread's generic-proxy shared-memory accesses (stores, and
// cp.async writes it has waited for) before later async-proxy ones (wgmma
// operand reads).
__device__ __forceinline__ void FenceProxyAsyncShared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Arrives on mbarrier `bar` once every cp.async this thread issued so far
// has landed; the arrival counts towards the barrier's expected count (noinc).
__device__ __forceinline__ void CpAsyncMbarArrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

// Each wrapper exists for bf16 and for f16 operands (the E4M3 KV cache is
// widened to f16 exactly); the macros below take T, the PTX type of A and B.
//
// d[N/2] = A (64 x 16 at a_desc, K-major) * B (16 x N at b_desc, K-major)
// + (scale_d ? d : 0).
template <int N>
__device__ __forceinline__ void WgmmaBf16SS(float (&d)[N / 2], uint64_t a_desc, uint64_t b_desc, int scale_d);
template <int N>
__device__ __forceinline__ void WgmmaF16SS(float (&d)[N / 2], uint64_t a_desc, uint64_t b_desc, int scale_d);

// d[N/2] = A (64 x 16, registers) * B (16 x N at b_desc, MN-major)
// + (scale_d ? d : 0).
template <int N>
__device__ __forceinline__ void WgmmaBf16RS(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b_desc, int scale_d);
template <int N>
__device__ __forceinline__ void WgmmaF16RS(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b_desc, int scale_d);

// The same with a K-major B (as the SS wrappers').
template <int N>
__device__ __forceinline__ void WgmmaBf16RSK(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b_desc, int scale_d);
template <int N>
__device__ __forceinline__ void WgmmaF16RSK(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b_desc, int scale_d);

#define GEMMA_WGMMA_SS32(T)                                 \
  asm volatile(                                             \
      "{\n.reg .pred p;\n"                                  \
      "setp.ne.b32 p, %18, 0;\n"                            \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." T "." T \
      " "                                                   \
      "{" GEMMA_WGMMA_REGS16                                \
      "}, "                                                 \
      "%16, %17, p, 1, 1, 0, 0;\n}\n"                       \
      : GEMMA_WGMMA_ACC16                                   \
      : "l"(a_desc), "l"(b_desc), "r"(scale_d))
#define GEMMA_WGMMA_SS64(T)                                 \
  asm volatile(                                             \
      "{\n.reg .pred p;\n"                                  \
      "setp.ne.b32 p, %34, 0;\n"                            \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T \
      " "                                                   \
      "{" GEMMA_WGMMA_REGS32                                \
      "}, "                                                 \
      "%32, %33, p, 1, 1, 0, 0;\n}\n"                       \
      : GEMMA_WGMMA_ACC32                                   \
      : "l"(a_desc), "l"(b_desc), "r"(scale_d))
#define GEMMA_WGMMA_RS256(T)                                 \
  asm volatile(                                              \
      "{\n.reg .pred p;\n"                                   \
      "setp.ne.b32 p, %133, 0;\n"                            \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." T "." T \
      " "                                                    \
      "{" GEMMA_WGMMA_REGS128                                \
      "}, "                                                  \
      "{%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"     \
      : GEMMA_WGMMA_ACC128                                   \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d))
#define GEMMA_WGMMA_RSK32(T)                                \
  asm volatile(                                             \
      "{\n.reg .pred p;\n"                                  \
      "setp.ne.b32 p, %21, 0;\n"                            \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." T "." T \
      " "                                                   \
      "{" GEMMA_WGMMA_REGS16                                \
      "}, "                                                 \
      "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"         \
      : GEMMA_WGMMA_ACC16                                   \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d))
#define GEMMA_WGMMA_RSK64(T)                                \
  asm volatile(                                             \
      "{\n.reg .pred p;\n"                                  \
      "setp.ne.b32 p, %37, 0;\n"                            \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T \
      " "                                                   \
      "{" GEMMA_WGMMA_REGS32                                \
      "}, "                                                 \
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"         \
      : GEMMA_WGMMA_ACC32                                   \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d))

template <>
__device__ __forceinline__ void WgmmaBf16SS<32>(float (&d)[16], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  GEMMA_WGMMA_SS32("bf16");
}
template <>
__device__ __forceinline__ void WgmmaF16SS<32>(float (&d)[16], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  GEMMA_WGMMA_SS32("f16");
}
template <>
__device__ __forceinline__ void WgmmaBf16SS<64>(float (&d)[32], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  GEMMA_WGMMA_SS64("bf16");
}
template <>
__device__ __forceinline__ void WgmmaF16SS<64>(float (&d)[32], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  GEMMA_WGMMA_SS64("f16");
}
template <>
__device__ __forceinline__ void WgmmaBf16RS<256>(float (&d)[128], const uint32_t (&a)[4], uint64_t b_desc,
                                                 int scale_d) {
  GEMMA_WGMMA_RS256("bf16");
}
template <>
__device__ __forceinline__ void WgmmaF16RS<256>(float (&d)[128], const uint32_t (&a)[4], uint64_t b_desc, int scale_d) {
  GEMMA_WGMMA_RS256("f16");
}
template <>
__device__ __forceinline__ void WgmmaBf16RSK<32>(float (&d)[16], const uint32_t (&a)[4], uint64_t b_desc, int scale_d) {
  GEMMA_WGMMA_RSK32("bf16");
}
template <>
__device__ __forceinline__ void WgmmaF16RSK<32>(float (&d)[16], const uint32_t (&a)[4], uint64_t b_desc, int scale_d) {
  GEMMA_WGMMA_RSK32("f16");
}
template <>
__device__ __forceinline__ void WgmmaBf16RSK<64>(float (&d)[32], const uint32_t (&a)[4], uint64_t b_desc, int scale_d) {
  GEMMA_WGMMA_RSK64("bf16");
}
template <>
__device__ __forceinline__ void WgmmaF16RSK<64>(float (&d)[32], const uint32_t (&a)[4], uint64_t b_desc, int scale_d) {
  GEMMA_WGMMA_RSK64("f16");
}

#undef GEMMA_WGMMA_SS32
#undef GEMMA_WGMMA_SS64
#undef GEMMA_WGMMA_RS256
#undef GEMMA_WGMMA_RSK32
#undef GEMMA_WGMMA_RSK64

}  // namespace gemma::kernels
