// 16-byte loads for data read exactly once (decode weights). Weights only:
// the load is not ordered against WaitForPreviousKernel (kernels/common/pdl.cuh),
// so data a previous kernel writes must not come through it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gemma::kernels {

// Keeps the data out of L1, marks its L2 lines first to evict (a decode
// step streams ~30 GB of weights through a 60 MB L2; the norms' weights, the
// activations and the recent KV rows should stay) and asks L2 to fetch whole
// 256-byte sectors ahead.
__device__ __forceinline__ uint4 LoadStream(const uint4* ptr) {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(ptr), "l"(policy));
  return v;
}

}  // namespace gemma::kernels
