// CUDA runtime error handling and device memory ownership for the CUDA
// backend. Errors become absl::Status at this boundary; nothing throws.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gemma::cuda {

inline absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

// A kernel launcher's message ("" = success) as a status.
inline absl::Status KernelStatus(const std::string& message) {
  if (message.empty()) return absl::OkStatus();
  return absl::InternalError(message);
}

#define GEMMA_CUDA_RETURN_IF_ERROR(expr)                                     \
  do {                                                                       \
    absl::Status _st = ::gemma::cuda::CudaStatus((expr), #expr);             \
    if (!_st.ok()) return _st;                                               \
  } while (0)

#define GEMMA_KERNEL_RETURN_IF_ERROR(expr)                                   \
  do {                                                                       \
    absl::Status _st = ::gemma::cuda::KernelStatus((expr));                  \
    if (!_st.ok()) return _st;                                               \
  } while (0)

#define GEMMA_STATUS_RETURN_IF_ERROR(expr)                                   \
  do {                                                                       \
    absl::Status _st = (expr);                                               \
    if (!_st.ok()) return _st;                                               \
  } while (0)

// Owns one cudaMalloc'ed (or, with `pinned`, cudaMallocHost'ed) allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      pinned_ = o.pinned_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  absl::Status Allocate(size_t bytes, bool pinned = false) {
    Reset();
    pinned_ = pinned;
    cudaError_t err = pinned ? cudaMallocHost(&ptr_, bytes) : cudaMalloc(&ptr_, bytes);
    if (err != cudaSuccess) {
      ptr_ = nullptr;
      return absl::ResourceExhaustedError(absl::StrCat(
          pinned ? "cudaMallocHost" : "cudaMalloc", " of ", bytes, " bytes: ", cudaGetErrorString(err)));
    }
    bytes_ = bytes;
    return absl::OkStatus();
  }
  void Reset() {
    if (ptr_) pinned_ ? cudaFreeHost(ptr_) : cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool pinned_ = false;
};

}  // namespace gemma::cuda
