// One row's sampling parameters: the per-sequence struct the engine fills
// (engine/sampling/row_sampler.h names it RowSampling) and the sampling
// kernel reads from device memory. Plain data, no CUDA or engine types.
#pragma once

#include <cstdint>

#include "kernels/sampling/sample_rng.h"

namespace gemma::kernels {

// y = logits / temperature truncated by top-k, then top-p, then min-p, drawn
// with counter-based noise from (seed, step) (sample.h has the exact rule).
struct SampleRowParams {
  float temperature = 0.0f;  // < kMinSampleTemperature (1e-5): greedy (IsGreedy)
  int32_t top_k = 0;         // <= 0 or >= vocab: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  uint64_t seed = 0;
  uint64_t step = 0;         // the sequence's output index being drawn
};

// The one greedy rule of device and host draws: the argmax (lowest id on
// ties) below kMinSampleTemperature, including 0 and NaN.
GEMMA_HOST_DEVICE bool IsGreedy(const SampleRowParams& row) { return IsGreedyTemperature(row.temperature); }

}  // namespace gemma::kernels
