// Programmatic dependent launch (Hopper): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the
// previous kernel in the stream is still running, once every block of that
// kernel has called AllowDependentLaunch() (or exited). It must call
// WaitForPreviousKernel() before reading anything the previous kernel wrote.
//
// A decode step's kernels are launched this way and each lets its successor
// launch only after its own WaitForPreviousKernel() returned: the successor's
// blocks then become resident (and the GEMVs prefetch weights, the small
// kernels compute what needs no input) while this kernel works, but never
// while the kernel before it still runs. Letting successors launch at a
// kernel's very start instead measured 0.35 ms/token slower (2026-11-30):
// blocks two kernels ahead sat waiting on multiprocessors a GEMV's later
// waves needed. (The residual norm of a decode step of a few tokens is the
// exception, ResidualNormParams::launch_next_early: its successor is a GEMV,
// whose blocks then take multiprocessors as the previous GEMV's leave.)
//
// Every block of a PDL-launched kernel must execute WaitForPreviousKernel()
// before it exits: the kernel's completion then implies its predecessor's,
// which is what lets a successor that waits on it read anything written by
// kernels further back. Reads before the wait are limited to data no kernel
// of the step writes (weights, the step's metadata copied before its first
// kernel; the fused decode kernel also reads the KV rows of earlier steps,
// kernels/attention/decode_fused.cu, which every kernel of those steps has
// finished writing: a step starts after the host synchronized on the last).
// Data the previous kernel writes is never read through a const __restrict__
// pointer (nor LoadStream, kernels/common/stream_load.cuh): the compiler may
// take it as unchanged for the kernel's lifetime and load it before the wait.
// GatherRowsKernel (kernels/elementwise) is launched without the attribute
// and lets its successor launch at its start: nothing runs before it but
// finished kernels.
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

namespace pdl_detail {
// cluster: null for a launch without clusters.
template <typename... KernelArgs, typename... Args>
cudaError_t Launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, const dim3* cluster, size_t smem,
                   cudaStream_t stream, const Args&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cluster != nullptr) {
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = cluster->x;
    attr[1].val.clusterDim.y = cluster->y;
    attr[1].val.clusterDim.z = cluster->z;
    cfg.numAttrs = 2;
  }
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}
}  // namespace pdl_detail

// Launches `kernel` with programmatic stream serialization. REQUIRES: the
// kernel calls WaitForPreviousKernel() before touching memory that earlier
// kernels write (it may start while they still run). Errors show in the
// caller's LaunchError.
template <typename... KernelArgs, typename... Args>
void LaunchWithPdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   const Args&... args) {
  pdl_detail::Launch(kernel, grid, block, nullptr, smem, stream, args...);
}

// The same in thread-block clusters of shape `cluster`; returns the launch's
// error (a cluster that cannot be placed fails here).
template <typename... KernelArgs, typename... Args>
cudaError_t LaunchWithPdlInClusters(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, dim3 cluster, size_t smem,
                                    cudaStream_t stream, const Args&... args) {
  return pdl_detail::Launch(kernel, grid, block, &cluster, smem, stream, args...);
}

}  // namespace gemma::kernels
