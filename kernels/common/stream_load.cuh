// 16-byte loads for data read exactly once (decode weights).
#pragma once

#include <cuda_runtime.h>

namespace gemma::kernels {

// Keeps the data out of L1 and asks L2 to fetch whole 256-byte sectors ahead.
__device__ __forceinline__ uint4 LoadStream(const uint4* ptr) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(ptr));
  return v;
}

}  // namespace gemma::kernels
