// The host twin of device sampling (kernels/sampling/sample.h): the same
// truncation rule and the same counter-based Gumbel noise, so a backend
// without a device can offer Backend::ForwardSample and tests can check the
// kernel against it.
#pragma once

#include <cstdint>
#include <span>

namespace gemma {

// One sequence's sampling on the device (Backend::ForwardSample): y =
// logits / temperature truncated by top-k, then top-p, then min-p, drawn
// with counter-based noise from (seed, step), so a draw depends on nothing
// else (kernels/sampling/sample.h has the exact rule).
struct RowSampling {
  float temperature = 0.0f;  // greedy per kernels::IsGreedyTemperature
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  uint64_t step = 0;         // the output index being drawn
};

// The token drawn from one row of fp32 logits.
int32_t SampleRow(std::span<const float> logits, const RowSampling& row);

}  // namespace gemma
