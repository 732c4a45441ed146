#include "engine/cuda/common/launch_timer.h"

#include <algorithm>
#include <cmath>

#include "engine/cuda/common/cuda_util.h"

namespace gemma::cuda {

absl::StatusOr<std::unique_ptr<LaunchTimer>> LaunchTimer::Create() {
  std::unique_ptr<LaunchTimer> t(new LaunchTimer());
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&t->start_));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&t->stop_));
  return t;
}

LaunchTimer::~LaunchTimer() {
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
}

absl::StatusOr<float> LaunchTimer::MeanMs(const std::function<std::string(int)>& launch, int reps,
                                          cudaStream_t stream) {
  GEMMA_KERNEL_RETURN_IF_ERROR(launch(0));
  reps = std::max(reps, 1);
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventRecord(start_, stream));
  std::string err;
  for (int i = 0; i < reps; ++i) {
    std::string e = launch(i);
    if (err.empty()) err = std::move(e);
  }
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop_, stream));
  // A launch refused mid-sequence would make the mean look fast.
  GEMMA_KERNEL_RETURN_IF_ERROR(err);
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_));
  float ms = 0.0f;
  GEMMA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_, stop_));
  return ms / reps;
}

int64_t MsToNs(float ms) {
  return static_cast<int64_t>(std::llround(std::min(static_cast<double>(ms), 1e6) * 1e6));
}

float NsToMs(int64_t ns) { return static_cast<float>(static_cast<double>(ns) / 1e6); }

}  // namespace gemma::cuda
