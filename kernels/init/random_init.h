// Deterministic random tensors generated on the device, for benchmarking the
// real model shape without its checkpoint. Element i of a tensor is a pure
// function of (seed, i): uniform in [mean - a, mean + a] with a = sqrt(3)*std,
// so it has the given mean and standard deviation.
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace gemma::kernels {

struct RandomFillParams {
  __nv_bfloat16* out_bf16 = nullptr;  // [count], or
  float* out_f32 = nullptr;           // [count] (exactly one)
  int64_t count = 0;
  uint64_t seed = 0;
  float mean = 0.0f;
  float stddev = 0.02f;
};

std::string LaunchRandomFill(const RandomFillParams& p, cudaStream_t stream);

// Host twin of the device generator, for tests.
float RandomFillValue(uint64_t seed, int64_t index, float mean, float stddev);

}  // namespace gemma::kernels
