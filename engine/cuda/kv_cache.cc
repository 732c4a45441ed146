#include "engine/cuda/kv_cache.h"

#include <algorithm>

namespace gemma::cuda {

absl::StatusOr<KvCache> KvCache::Create(const ModelConfig& config, int num_slots, int max_context,
                                        int max_chunk_tokens) {
  KvCache cache;
  cache.num_slots_ = num_slots;
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const LayerSpec& s : config.layers) {
    LayerKv kv;
    if (s.is_global()) {
      kv.capacity = max_context;
    } else {
      // Sized by the window and the pass, never by the context (attention.h
      // requires capacity >= window + max_q_len - 1).
      kv.capacity = config.sliding_window + max_chunk_tokens - 1;
      kv.ring = true;
    }
    cache.layers_.push_back(kv);
    offsets.push_back(total);
    total += 2 * static_cast<size_t>(num_slots) * kv.capacity * s.num_kv_heads * s.head_dim;
  }
  GEMMA_STATUS_RETURN_IF_ERROR(cache.buffer_.Allocate(total * sizeof(__nv_bfloat16)));
  // Unwritten positions are never read (kernels are length-aware), but a
  // defined start keeps any bug reproducible.
  GEMMA_CUDA_RETURN_IF_ERROR(cudaMemset(cache.buffer_.get(), 0, cache.buffer_.bytes()));
  __nv_bfloat16* base = cache.buffer_.get<__nv_bfloat16>();
  for (size_t l = 0; l < cache.layers_.size(); ++l) {
    const LayerSpec& s = config.layers[l];
    const size_t half = static_cast<size_t>(num_slots) * cache.layers_[l].capacity * s.num_kv_heads * s.head_dim;
    cache.layers_[l].k = base + offsets[l];
    cache.layers_[l].v = base + offsets[l] + half;
  }
  return cache;
}

}  // namespace gemma::cuda
