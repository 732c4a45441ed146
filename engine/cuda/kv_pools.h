// The paged KV pools of the CUDA backend: sized from free device memory at
// start-up, after weights, activations and tuning took theirs (or fixed by
// num_kv_blocks), and the checks of a chunk's block tables against them.
// Thread-safety: owned by the backend's thread.
#pragma once

#include "absl/status/status.h"
#include "engine/core/backend.h"
#include "engine/core/backend_options.h"
#include "engine/cuda/kv_cache.h"
#include "engine/model/config.h"

namespace gemma::cuda {

class KvPools {
 public:
  // The pools on the device; empty until Allocate. The address is stable, so
  // the forward may hold it before the pools exist.
  KvCache* mutable_cache() { return &cache_; }
  const KvCache& cache() const { return cache_; }
  // The sliding pool holds every slot's window plus one step's chunk (the
  // larger of `chunk_tokens` and options.max_tokens_per_step); the global
  // pool gets the rest of gpu_memory_utilization * total memory.
  absl::Status Allocate(const ModelConfig& config, const BackendOptions& options, int max_context,
                        int chunk_tokens);
  // OK when the chunk's tables cover its positions with blocks of the pools
  // (sliding entries only inside the window its first query reads).
  absl::Status CheckTables(const SequenceChunk& c) const;
  KvCacheSpec spec() const {
    return {cache_.block_size(), cache_.num_global_blocks(), cache_.num_sliding_blocks()};
  }
  size_t bytes() const { return cache_.bytes(); }

 private:
  KvCache cache_;
  int sliding_window_ = 0;
};

}  // namespace gemma::cuda
