// Launch helpers for launchers (they return "" on success or a message):
// the launch status, and the grid of a persistent kernel.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

namespace gemma::kernels {

// The error of the launch just made, prefixed with the kernel's name.
inline std::string LaunchError(const char* kernel) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return "";
  return std::string(kernel) + ": " + cudaGetErrorString(err);
}

// Blocks of `threads` threads that `Kernel` keeps resident on the current
// device at once (no dynamic shared memory). Queried once per kernel and
// process (the server drives one device): a query per launch would slow the
// back-to-back launches that autotuning times.
template <auto Kernel>
int ResidentBlocks(int threads) {
  static const int resident = [threads] {
    int device = 0, sms = 0, per_sm = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, 0);
    return std::max(1, sms * per_sm);
  }();
  return resident;
}

// The device the calling thread works on (0 if it cannot be asked).
inline int CurrentDevice() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return device;
}

// Raises `Kernel`'s dynamic shared-memory limit to `bytes` on the current
// device, once per device: the limit belongs to the function in one device's
// context, so every GPU a process drives needs its own call. Returns that
// call's result (remembered). Not a stream operation: fine under capture.
template <auto Kernel>
cudaError_t SetSmemLimitOnThisDevice(int bytes) {
  static std::mutex mu;
  static std::map<int, cudaError_t> done;  // device -> result
  const int device = CurrentDevice();
  std::lock_guard<std::mutex> lock(mu);
  auto it = done.find(device);
  if (it == done.end()) {
    it = done.emplace(device, cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)).first;
    if (it->second != cudaSuccess) cudaGetLastError();
  }
  return it->second;
}

// A persistent kernel's grid for `tiles` units of work: at most `resident`
// blocks, trimmed so that every block gets the same number of tiles.
inline int PersistentGrid(int tiles, int resident) {
  const int rounds = (tiles + resident - 1) / resident;
  return (tiles + rounds - 1) / rounds;
}

}  // namespace gemma::kernels
