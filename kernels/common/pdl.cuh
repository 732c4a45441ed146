// Programmatic dependent launch (Hopper): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the
// previous kernel in the stream is still running, once every block of that
// kernel has called AllowDependentLaunch() (or exited). It must call
// WaitForPreviousKernel() before reading anything the previous kernel wrote.
//
// Used for the decode GEMV only: it prefetches weights before waiting, and the
// small kernels before it allow its launch early. Launching every decode
// kernel this way measured 0.35 ms/token slower on the H200 (2026-11-30),
// probably because waiting blocks of the small kernels then sit on
// multiprocessors the GEMV streams through.
#pragma once

namespace gemma::kernels {

__device__ __forceinline__ void AllowDependentLaunch() {
  asm volatile("griddepcontrol.launch_dependents;");
}

// Returns once the previous kernel has completed and its writes are visible;
// immediately when the kernel was launched without the attribute.
__device__ __forceinline__ void WaitForPreviousKernel() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

}  // namespace gemma::kernels

#include <cuda_runtime.h>

namespace gemma::kernels {

// Launches `kernel` with programmatic stream serialization. REQUIRES: the
// kernel calls WaitForPreviousKernel() before touching memory that earlier
// kernels write (it may start while they still run).
template <typename Params>
void LaunchWithPdl(void (*kernel)(const Params), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, const Params& params) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, kernel, params);
}

}  // namespace gemma::kernels
