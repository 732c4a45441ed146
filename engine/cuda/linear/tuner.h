// Start-up timing of every linear of the model, before decode graphs are
// captured and the paged KV pool takes the memory left: the GEMV tiling of
// each (n, k, batch) and, for fp8 matrices with a TMA descriptor, the wgmma
// FP8 linear against the GEMV / cuBLASLt per decode bucket. The measured
// choices are kept by the LinearDispatcher that runs them (and in the
// autotune cache file); the switches that steer them are in switches.h.
// Thread-safety: owned by the backend's thread.
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "absl/status/status.h"
#include "engine/cuda/common/device_matrix.h"
#include "engine/cuda/linear/linear.h"

namespace gemma::cuda {

// One linear of the model as decode runs it.
struct TunedMatrix {
  DeviceMatrix w;
  int n = 0, k = 0;
  bool lm_head = false;  // fp32 out, softcapped
  // Decode hands it x already in E4M3 when it wants that (the producing
  // norm or gelu gate writes the codes): QKV, gate/up and down; not o_proj
  // (attention output) or the LM head.
  bool codes_given = false;
};

class LinearTuner {
 public:
  LinearTuner(LinearDispatcher& linear, cudaStream_t stream) : linear_(linear), stream_(stream) {}

  // GEMV tilings of every matrix for batches 1 .. min(max_slots,
  // kGemvMaxBatch), then the wgmma FP8 linear for decode batches up to max_m
  // (fp8 matrices only; a tuning failure that leaves the device usable only
  // costs that path). `lm_head_softcap`: the LM head's final logit softcap.
  absl::Status Run(std::span<const TunedMatrix> mats, int max_slots, int max_m, float lm_head_softcap);

 private:
  absl::Status TuneGemv(std::span<const TunedMatrix> mats, int max_slots);
  absl::Status TuneWgmma(std::span<const TunedMatrix> mats, int max_m, float lm_head_softcap);

  LinearDispatcher& linear_;
  cudaStream_t stream_;
};

}  // namespace gemma::cuda
