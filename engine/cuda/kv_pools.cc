#include "engine/cuda/kv_pools.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "engine/cuda/common/cuda_util.h"

namespace gemma::cuda {

KvPoolSplit SplitKvBudget(const KvPoolDemand& d, double budget_bytes, int request_global_blocks) {
  const double g = static_cast<double>(d.global_block_bytes), s = static_cast<double>(d.sliding_block_bytes);
  const double chunk = d.chunk_blocks * s, full_sequence = d.sequence_global_blocks * g;
  // Slots that can each run a sized request at once, and keep one sequence
  // of max_context in the global pool.
  const double per_slot = d.window_blocks * s + request_global_blocks * g;
  int slots = d.max_slots;
  if (per_slot > 0) {
    const double fit = (budget_bytes - chunk - full_sequence + request_global_blocks * g) / per_slot;
    slots = static_cast<int>(std::clamp<double>(fit, 1.0, d.max_slots));
  }
  KvPoolSplit split;
  split.num_sliding = d.sliding_block_bytes > 0 ? slots * d.window_blocks + d.chunk_blocks : 0;
  if (d.global_block_bytes > 0) {
    const double fit = (budget_bytes - split.num_sliding * s) / g;
    split.num_global = static_cast<int>(std::min<double>(fit, INT32_MAX));
  }
  return split;
}

absl::Status KvPools::Allocate(const ModelConfig& config, const BackendOptions& options, int max_context,
                               int chunk_tokens) {
  sliding_window_ = config.sliding_window;
  const int block = options.kv_block_size;
  bool any_global = false, any_sliding = false;
  for (const LayerSpec& l : config.layers) (l.is_global() ? any_global : any_sliding) = true;
  const bool fp8 = options.kv_cache_dtype == KvCacheDType::kFP8;
  KvPoolDemand d;
  d.global_block_bytes = any_global ? KvCache::BlockBytes(config, block, true, fp8) : 0;
  d.sliding_block_bytes = any_sliding ? KvCache::BlockBytes(config, block, false, fp8) : 0;
  d.max_slots = options.max_slots;
  d.sequence_global_blocks = (max_context + block - 1) / block;
  // A sequence reads window - 1 positions back; one chunk's pass adds its
  // own tokens, and block boundaries one more block on each side.
  d.window_blocks = (config.sliding_window - 1 + block - 1) / block + 2;
  // The engine reserves a whole step's chunk at once (its token budget,
  // which may exceed one pass): the pool must hold it beside the windows.
  const int step_tokens = std::max(chunk_tokens, options.max_tokens_per_step);
  d.chunk_blocks = (step_tokens + block - 1) / block;
  int num_sliding = any_sliding ? options.max_slots * d.window_blocks + d.chunk_blocks : 0;
  int num_global = 0;
  if (options.num_kv_blocks > 0) {
    num_global = any_global ? options.num_kv_blocks : 0;
  } else {
    size_t free_bytes = 0, total_bytes = 0;
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    // Kept back for graphs, cuBLAS workspaces and the CUDA context's growth.
    constexpr double kReserve = 1.0e9;
    const double used = static_cast<double>(total_bytes - free_bytes);
    const double budget = options.gpu_memory_utilization * static_cast<double>(total_bytes) - used - kReserve;
    const double one_sequence = double(d.sequence_global_blocks) * d.global_block_bytes +
                                double(any_sliding ? d.window_blocks + d.chunk_blocks : 0) * d.sliding_block_bytes;
    if (budget < one_sequence)
      return absl::ResourceExhaustedError(absl::StrCat(
          "gpu_memory_utilization ", options.gpu_memory_utilization, " leaves ", budget / 1e9,
          " GB for the KV cache (", used / 1e9, " GB in use of ", total_bytes / 1e9,
          " GB); one sequence of max_context ", max_context, " tokens needs ", one_sequence / 1e9, " GB"));
    const int request_blocks = (std::min(max_context, kKvSplitRequestTokens) + block - 1) / block;
    const KvPoolSplit split = SplitKvBudget(d, budget, request_blocks);
    num_sliding = split.num_sliding;
    num_global = std::min(split.num_global, INT32_MAX / block);
  }
  if (any_global && num_global < 1)
    return absl::InvalidArgumentError(absl::StrCat("num_kv_blocks must be >= 1, got ", num_global));
  // Kernels index a pool's rows with int: blocks x block size must fit.
  if (int64_t{num_global} * block > INT32_MAX || int64_t{num_sliding} * block > INT32_MAX)
    return absl::InvalidArgumentError(absl::StrCat("num_kv_blocks ", num_global, " x kv_block_size ", block,
                                                   " rows exceed a KV pool's 2^31 - 1 rows"));
  auto cache_or = KvCache::CreatePaged(config, block, num_global, num_sliding, fp8);
  if (!cache_or.ok()) return cache_or.status();
  cache_ = std::move(*cache_or);
  demand_ = d;
  return absl::OkStatus();
}

int ConcurrentSequences(const KvPoolDemand& d, const KvPoolSplit& s, int block_size, int tokens) {
  if (block_size <= 0 || tokens < 1) return 0;
  int n = d.max_slots;
  if (d.global_block_bytes > 0) n = std::min(n, s.num_global / ((tokens + block_size - 1) / block_size));
  if (d.sliding_block_bytes > 0 && d.window_blocks > 0) {
    n = std::min(n, (s.num_sliding - d.chunk_blocks) / d.window_blocks);
  }
  return std::max(n, 0);
}

int KvPools::ConcurrentSequences(int tokens) const {
  return cuda::ConcurrentSequences(demand_, {cache_.num_global_blocks(), cache_.num_sliding_blocks()},
                                   cache_.block_size(), tokens);
}

absl::Status KvPools::CheckTables(const SequenceChunk& c) const {
  const int block = cache_.block_size();
  const int end = c.start_position + static_cast<int>(c.token_ids.size());
  const int needed = (end + block - 1) / block;
  auto check = [&](std::span<const int32_t> table, int first, int num_blocks, const char* name) -> absl::Status {
    if (num_blocks == 0) return absl::OkStatus();  // the model has no such layer
    if (static_cast<int>(table.size()) < needed)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, ": ", name, " table has ", table.size(),
                                                     " blocks, positions up to ", end, " need ", needed));
    for (int b = first; b < needed; ++b) {
      if (table[b] < 0 || table[b] >= num_blocks)
        return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, ": ", name, " block ", table[b],
                                                       " at table index ", b, " is not in [0, ", num_blocks, ")"));
    }
    return absl::OkStatus();
  };
  GEMMA_STATUS_RETURN_IF_ERROR(check(c.global_blocks, 0, cache_.num_global_blocks(), "global"));
  const int first_live = std::max(0, c.start_position - sliding_window_ + 1) / block;
  return check(c.sliding_blocks, first_live, cache_.num_sliding_blocks(), "sliding");
}

}  // namespace gemma::cuda
