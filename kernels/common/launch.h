// Launch-status helper for launchers: they return "" on success or a message.
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace gemma::kernels {

// The error of the launch just made, prefixed with the kernel's name.
inline std::string LaunchError(const char* kernel) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return "";
  return std::string(kernel) + ": " + cudaGetErrorString(err);
}

}  // namespace gemma::kernels
