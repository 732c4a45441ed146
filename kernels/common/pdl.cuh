// Programmatic dependent launch (Hopper): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the
// previous kernel in the stream is still running, once every block of that
// kernel has called AllowDependentLaunch() (or exited). It must call
// WaitForPreviousKernel() before reading anything the previous kernel wrote.
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
