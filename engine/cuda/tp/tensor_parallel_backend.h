// The CUDA backend over N GPUs (Megatron tensor parallelism, one process, a
// thread per GPU): rank r is a one-GPU CudaBackend on devices[r] that loads
// its shard (engine/parallel/rank_model.h) and sums its o_proj and down_proj
// outputs with the other ranks' (engine/cuda/comm). The engine's one
// scheduler calls Forward; every rank runs the same passes on its own thread
// (decode graphs, all-reduces captured inside, included), and rank 0's ids and
// logits are the result: the all-reduces leave the same bits on every rank,
// so the embedding, the final norm and the LM head (whole on every rank)
// give every rank the same logits.
//
// Thread-safety: like every Backend, called only from the engine's thread.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/core/backend_options.h"
#include "engine/cuda/cuda_backend.h"

namespace gemma {

struct TensorParallelCudaOptions {
  // GPU of each rank; size = options.tensor_parallel_size. A GPU may repeat
  // (ranks sharing one GPU: tests; then options.num_kv_blocks must be set,
  // and all-reduces take the one-shot kernel only).
  std::vector<int> devices;
  // All-reduces of up to this many bytes take the one-shot peer kernel,
  // larger ones NCCL (when libnccl.so.2 loads; else the kernel takes all).
  int64_t oneshot_max_bytes = 512 * 1024;
};

absl::StatusOr<std::unique_ptr<Backend>> CreateTensorParallelCudaBackend(const BackendOptions& options,
                                                                         const CudaTuning& tuning,
                                                                         const TensorParallelCudaOptions& tp);

}  // namespace gemma
