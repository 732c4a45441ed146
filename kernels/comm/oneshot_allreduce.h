// One-shot all-reduce over peer access, for the small messages of a
// tensor-parallel decode step (one activation row per sequence): every rank
// copies its partial into its own staging buffer, the ranks meet at a
// flag barrier, and each rank reads every rank's staging buffer (NVLink peer
// loads) and sums in fp32, in rank order, so all ranks hold the same bits.
// A second barrier keeps a rank from overwriting its staging buffer while a
// peer still reads it.
//
// The barrier's epoch lives in device memory (a counter per block, bumped by
// every call), not in the arguments, so a launch captured in a CUDA graph
// replays correctly. Every rank must issue the same sequence of calls (sizes
// included); the ranks' launches must be able to run at the same time (one
// GPU each, or several on one GPU on different streams: a test set-up).
// No engine types; the launcher validates, never allocates or synchronizes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace gemma::kernels {

constexpr int kAllReduceMaxRanks = 8;
constexpr int kOneShotMaxBlocks = 64;

struct OneShotAllReduceParams {
  const __nv_bfloat16* in = nullptr;  // [count] this rank's partial
  __nv_bfloat16* out = nullptr;       // [count] the sum over ranks; may equal `in`
  // Every rank's staging buffer [capacity] and signal block
  // (OneShotSignalBytes()), indexed by rank; peer pointers for the others.
  __nv_bfloat16* staging[kAllReduceMaxRanks] = {};
  uint32_t* signals[kAllReduceMaxRanks] = {};
  int rank = 0;
  int num_ranks = 0;       // 1..kAllReduceMaxRanks
  int64_t count = 0;       // multiple of 8, <= capacity
  int64_t capacity = 0;
};

// Bytes of one rank's signal block (zeroed before the first call).
size_t OneShotSignalBytes();
std::string LaunchOneShotAllReduce(const OneShotAllReduceParams& p, cudaStream_t stream);

}  // namespace gemma::kernels
