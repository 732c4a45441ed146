// Hopper (sm_90a) warpgroup MMA PTX: wgmma fences and groups, the
// shared-memory matrix descriptor of a K-major 128-byte-swizzled operand, and
// m64nNk32 E4M3 x E4M3 -> fp32 (kernels/gemv/wgmma_fp8.cu describes the
// fields and fragment layouts with their PTX ISA references).
#pragma once

#include <cstdint>

namespace gemma::kernels {

// The 128-byte swizzle repeats every 8 rows x 128 B.
inline constexpr int kSwizzleAtom = 1024;

__device__ __forceinline__ void WgmmaFence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void WgmmaCommit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accesses of the accumulators across the
// asynchronous wgmma that owns them.
template <int R>
__device__ __forceinline__ void FenceRegs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The matrix descriptor of a K-major, 128-byte-swizzled operand whose rows
// are 128 bytes apart, starting at shared address `addr` (the notes atop
// kernels/gemv/wgmma_fp8.cu give each field).
__device__ __forceinline__ uint64_t SmemDescSw128(uint32_t addr) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((addr & 0x3FFFFu) >> 4);         // bits 0-13: start address >> 4
  d |= static_cast<uint64_t>(1) << 16;                        // bits 16-29: LBO (unused here) = 16 B
  d |= static_cast<uint64_t>(kSwizzleAtom >> 4) << 32;        // bits 32-45: SBO = 1024 B between 8-row groups
  d |= static_cast<uint64_t>(1) << 62;                        // bits 62-63: 128-byte swizzle; 49-51 base offset 0
  return d;
}

// Operand lists of the wgmma wrappers (here and in wgmma_bf16.cuh): the
// accumulator d[0..N) as asm outputs, and its registers %0..%(N-1) in the
// instruction text.
#define GEMMA_WGMMA_ACC8 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define GEMMA_WGMMA_REGS8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define GEMMA_WGMMA_ACC16 \
  GEMMA_WGMMA_ACC8, \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define GEMMA_WGMMA_REGS16 \
  GEMMA_WGMMA_REGS8 ", " \
  "%8, %9, %10, %11, %12, %13, %14, %15"
#define GEMMA_WGMMA_ACC32 \
  GEMMA_WGMMA_ACC16, \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define GEMMA_WGMMA_REGS32 \
  GEMMA_WGMMA_REGS16 ", " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define GEMMA_WGMMA_ACC64 \
  GEMMA_WGMMA_ACC32, \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define GEMMA_WGMMA_REGS64 \
  GEMMA_WGMMA_REGS32 ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define GEMMA_WGMMA_ACC128 \
  GEMMA_WGMMA_ACC64, \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define GEMMA_WGMMA_REGS128 \
  GEMMA_WGMMA_REGS64 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// d[N/2] = A (64 x 32 e4m3 at a_desc) * B (32 x N e4m3 at b_desc)
// + (scale_d ? d : 0).
template <int N>
__device__ __forceinline__ void WgmmaE4M3(float (&d)[N / 2], uint64_t a_desc, uint64_t b_desc, int scale_d);

template <>
__device__ __forceinline__ void WgmmaE4M3<16>(float (&d)[8], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
      "{" GEMMA_WGMMA_REGS8 "}, "
      "%8, %9, p, 1, 1;\n}\n"
      : GEMMA_WGMMA_ACC8
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}

template <>
__device__ __forceinline__ void WgmmaE4M3<32>(float (&d)[16], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
      "{" GEMMA_WGMMA_REGS16 "}, "
      "%16, %17, p, 1, 1;\n}\n"
      : GEMMA_WGMMA_ACC16
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}

template <>
__device__ __forceinline__ void WgmmaE4M3<64>(float (&d)[32], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{" GEMMA_WGMMA_REGS32 "}, "
      "%32, %33, p, 1, 1;\n}\n"
      : GEMMA_WGMMA_ACC32
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}

template <>
__device__ __forceinline__ void WgmmaE4M3<128>(float (&d)[64], uint64_t a_desc, uint64_t b_desc, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{" GEMMA_WGMMA_REGS64 "}, "
      "%64, %65, p, 1, 1;\n}\n"
      : GEMMA_WGMMA_ACC64
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}

}  // namespace gemma::kernels
