// The CPU reference backend: the full Gemma 4 forward in fp32 from bf16 (or
// f16/f32) weights, a paged KV cache (sliding layers read only the window's
// blocks), several sequences per step, work split over all cores. It can also
// run the forward as N tensor-parallel ranks in one process, so the sharding
// arithmetic of the multi-GPU path is tested without GPUs.
//
// Thread-safety: like every Backend, driven by one thread.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/model/weights.h"

namespace gemma {

struct CpuBackendOptions {
  int max_slots = 8;
  int max_context = 4096;
  int num_threads = 0;  // 0 = all cores
  int block_size = 16;  // tokens per KV block
  int num_blocks = 0;   // per pool (global, sliding); 0 = max_slots full contexts
  // Ranks of a tensor-parallel forward simulated in this process: each holds
  // its shard (engine/parallel/shard_plan.h) and KV heads, and the partial
  // outputs are summed where a multi-GPU forward all-reduces. 1 = no sharding.
  int tensor_parallel_size = 1;
};

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const LoadedModel& model,
                                                          const CpuBackendOptions& options);

}  // namespace gemma
