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

// What the two pools need, in blocks, and what a block of each costs.
struct KvPoolDemand {
  size_t global_block_bytes = 0;   // 0: the model has no global layer
  size_t sliding_block_bytes = 0;  // 0: the model has no sliding layer
  int max_slots = 1;
  int sequence_global_blocks = 0;  // one sequence of max_context
  int window_blocks = 0;           // one sequence's window
  int chunk_blocks = 0;            // one step's chunk, once
};
struct KvPoolSplit {
  int num_global = 0;
  int num_sliding = 0;
};
// Sequences the split is sized for run min(max_context, this) tokens.
inline constexpr int kKvSplitRequestTokens = 4096;
// The split of `budget_bytes` (pure; OK only when the budget holds one
// sequence of max_context). The sliding pool holds a window for each of as
// many slots as can run a sequence of min(max_context,
// kKvSplitRequestTokens) tokens at once with the global blocks left (all
// slots when memory allows), plus one chunk; the global pool gets the rest,
// never less than one sequence of max_context. A sliding window costs a
// sequence the same blocks whatever its length while its global blocks grow
// with it, so windows for every slot on a small budget would leave the
// global pool a single sequence.
KvPoolSplit SplitKvBudget(const KvPoolDemand& d, double budget_bytes, int request_global_blocks);
// Sequences of `tokens` tokens (blocks of `block_size`) that pools split as
// `s` hold at once: at most max_slots, each with its window and its global
// blocks.
int ConcurrentSequences(const KvPoolDemand& d, const KvPoolSplit& s, int block_size, int tokens);

class KvPools {
 public:
  // The pools on the device; empty until Allocate. The address is stable, so
  // the forward may hold it before the pools exist.
  KvCache* mutable_cache() { return &cache_; }
  const KvCache& cache() const { return cache_; }
  // The pools share gpu_memory_utilization * total memory as SplitKvBudget
  // says (a chunk is the larger of `chunk_tokens` and
  // options.max_tokens_per_step), or options.num_kv_blocks global blocks and
  // every slot's window.
  absl::Status Allocate(const ModelConfig& config, const BackendOptions& options, int max_context,
                        int chunk_tokens);
  // OK when the chunk's tables cover its positions with blocks of the pools
  // (sliding entries only inside the window its first query reads).
  absl::Status CheckTables(const SequenceChunk& c) const;
  KvCacheSpec spec() const {
    return {cache_.block_size(), cache_.num_global_blocks(), cache_.num_sliding_blocks()};
  }
  size_t bytes() const { return cache_.bytes(); }
  // Sequences of `tokens` tokens the pools hold at once (at most max_slots;
  // 0 before Allocate).
  int ConcurrentSequences(int tokens) const;

 private:
  KvCache cache_;
  int sliding_window_ = 0;
  KvPoolDemand demand_;  // as Allocate sized the pools
};

}  // namespace gemma::cuda
