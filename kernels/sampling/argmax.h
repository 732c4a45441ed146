// Greedy sampling on the device: the index of each row's largest value (the
// smallest index among ties, as torch.argmax). Only ids cross to the host.
//
// A row is split over up to kArgmaxMaxChunks blocks when a workspace is
// given: each block writes its chunk's best (value, index) and the last block
// of the row to finish (an atomic count) reduces them, writes the id and
// zeroes the count again, so one launch suffices and a captured graph can
// replay it. Without a workspace one block scans the whole row (1 MB of fp32
// logits for a 262 144-token vocabulary: ~10x slower on the H200).
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace gemma::kernels {

inline constexpr int kArgmaxMaxChunks = 64;

struct ArgmaxParams {
  const float* logits = nullptr;  // [num_rows, vocab]
  int32_t* out = nullptr;         // [num_rows]
  int num_rows = 0;
  int vocab = 0;
  // ArgmaxWorkspaceBytes(rows) for the most rows any launch on it has,
  // zero-filled once when allocated (the kernel leaves its counts zeroed);
  // nullptr: one block per row.
  void* workspace = nullptr;
};

size_t ArgmaxWorkspaceBytes(int max_rows);

std::string LaunchArgmax(const ArgmaxParams& p, cudaStream_t stream);

}  // namespace gemma::kernels
