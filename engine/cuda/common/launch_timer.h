// Start-up kernel timing shared by the tuners (LinearDispatcher's GEMV choice,
// the wgmma FP8 path's): the mean time per launch of a back-to-back
// sequence on one stream, measured with CUDA events. Not graph-safe (it
// synchronizes): call before capture. Thread-safety: one thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gemma::cuda {

class LaunchTimer {
 public:
  static absl::StatusOr<std::unique_ptr<LaunchTimer>> Create();
  ~LaunchTimer();
  // Mean ms of launch(i), i = 0 .. reps - 1, run back to back after one
  // untimed launch(0) whose error ("" = none) is returned as the status.
  absl::StatusOr<float> MeanMs(const std::function<std::string(int)>& launch, int reps, cudaStream_t stream);

 private:
  LaunchTimer() = default;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Tuned times are kept in whole nanoseconds, in memory and in the autotune
// cache alike, so a cached choice decides exactly as the timed one did.
// (Clamped to 1000 s: an untimed family's 1e30 "infinity" must not overflow.)
int64_t MsToNs(float ms);
float NsToMs(int64_t ns);
inline float RoundToNs(float ms) { return NsToMs(MsToNs(ms)); }

}  // namespace gemma::cuda
