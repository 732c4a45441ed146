// Sampling on the device for a whole batch, each row with its own
// temperature, top-k, top-p, min-p, seed and step. Only ids reach the host.
//
// Per row (SampleRowParams, sample_row.h), with y = logits / temperature
// (IsGreedy: argmax, lowest id on ties):
//   top-k  keeps y >= the k-th largest y;
//   top-p  then keeps y >= the largest t whose kept mass sum(exp(y - max))
//          over y >= t reaches top_p of what top-k kept;
//   min-p  keeps y >= max(y) + log(min_p);
// and the token is argmax over the kept set of y + Gumbel noise from
// SampleUniform(seed, step, token): an exact draw from softmax(y) restricted
// to that set (Gumbel-max), needing no sort and no prefix sum. Thresholds are
// found by radix select over the float bits (top-p with fixed-point mass, so
// sums are exact and runs repeat bit for bit). Ties at a threshold are all
// kept (the host sampler keeps exactly k).
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/sampling/sample_row.h"

namespace gemma::kernels {

struct SampleParams {
  const float* logits = nullptr;           // [num_rows, vocab]
  const SampleRowParams* rows = nullptr;   // [num_rows]
  int32_t* out = nullptr;                  // [num_rows]
  int num_rows = 0;
  int vocab = 0;
};

std::string LaunchSample(const SampleParams& p, cudaStream_t stream);

}  // namespace gemma::kernels
