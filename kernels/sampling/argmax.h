// Greedy sampling on the device: the index of each row's largest value (the
// smallest index among ties, as torch.argmax). Only ids cross to the host.
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace gemma::kernels {

struct ArgmaxParams {
  const float* logits = nullptr;  // [num_rows, vocab]
  int32_t* out = nullptr;         // [num_rows]
  int num_rows = 0;
  int vocab = 0;
};

std::string LaunchArgmax(const ArgmaxParams& p, cudaStream_t stream);

}  // namespace gemma::kernels
