// The sum over tensor-parallel ranks that follows o_proj and down_proj (and
// the vocabulary-split embedding). A group holds one endpoint per rank, all
// in this process: each rank's thread drives its own endpoint on its own
// device and stream.
//
// Implementations: NCCL (loaded at run time, engine/cuda/comm/nccl_library.h),
// the one-shot peer-access kernel (kernels/comm/oneshot_allreduce.h), and a
// per-size combination of two groups. All are usable inside CUDA graph
// capture (nothing allocates or synchronizes per call).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gemma::cuda {

class AllReduce {
 public:
  virtual ~AllReduce() = default;
  // out = the sum over ranks of each rank's `in` ([count] bf16; out may equal
  // in), enqueued on `stream` of this rank's device. Every rank makes the same
  // calls, with the same counts, in the same order.
  virtual absl::Status SumBf16(const __nv_bfloat16* in, __nv_bfloat16* out, int64_t count,
                               cudaStream_t stream) = 0;
  virtual std::string_view name() const = 0;
};

using AllReduceGroup = std::vector<std::unique_ptr<AllReduce>>;  // [rank]

// NCCL communicators over `devices` (rank r on devices[r]; distinct devices).
absl::StatusOr<AllReduceGroup> CreateNcclGroup(std::span<const int> devices);

// The one-shot kernel over peer access, for messages of up to `max_count`
// elements (a multiple of 8). A device may appear more than once (ranks
// sharing a GPU: tests); distinct devices need peer access to each other.
absl::StatusOr<AllReduceGroup> CreatePeerGroup(std::span<const int> devices, int64_t max_count);

// Rank r sends messages of up to `max_small_count` elements through
// small[r], larger ones through large[r]. REQUIRES: equal sizes.
AllReduceGroup CombineBySize(AllReduceGroup small, AllReduceGroup large, int64_t max_small_count);

}  // namespace gemma::cuda
