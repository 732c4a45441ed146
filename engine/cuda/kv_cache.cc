#include "engine/cuda/kv_cache.h"

#include <algorithm>

namespace gemma::cuda {

absl::Status KvCache::Allocate(const ModelConfig& config, const std::vector<size_t>& rows) {
  std::vector<size_t> offsets;
  size_t total = 0;
  for (size_t l = 0; l < config.layers.size(); ++l) {
    offsets.push_back(total);
    total += 2 * rows[l] * config.layers[l].num_kv_heads * config.layers[l].head_dim;
  }
  const size_t element = fp8_ ? 1 : sizeof(__nv_bfloat16);
  GEMMA_STATUS_RETURN_IF_ERROR(buffer_.Allocate(total * element));
  // Unwritten rows are never read (tables name only written blocks), but a
  // defined start keeps any bug reproducible.
  GEMMA_CUDA_RETURN_IF_ERROR(cudaMemset(buffer_.get(), 0, buffer_.bytes()));
  uint8_t* base = buffer_.get<uint8_t>();
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerSpec& s = config.layers[l];
    const size_t half = rows[l] * s.num_kv_heads * s.head_dim;
    layers_[l].k = base + offsets[l] * element;
    layers_[l].v = base + (offsets[l] + half) * element;
  }
  return absl::OkStatus();
}

absl::StatusOr<KvCache> KvCache::CreatePaged(const ModelConfig& config, int block_size,
                                             int num_global_blocks, int num_sliding_blocks, bool fp8) {
  if (block_size <= 0 || (block_size & (block_size - 1)) != 0)
    return absl::InvalidArgumentError(absl::StrCat("kv_block_size must be a power of two, got ", block_size));
  KvCache cache;
  cache.fp8_ = fp8;
  cache.block_size_ = block_size;
  cache.num_global_blocks_ = num_global_blocks;
  cache.num_sliding_blocks_ = num_sliding_blocks;
  std::vector<size_t> rows;
  for (const LayerSpec& s : config.layers) {
    LayerKv kv;
    kv.num_blocks = s.is_global() ? num_global_blocks : num_sliding_blocks;
    kv.capacity = kv.num_blocks * block_size;
    cache.layers_.push_back(kv);
    rows.push_back(static_cast<size_t>(kv.capacity));
  }
  GEMMA_STATUS_RETURN_IF_ERROR(cache.Allocate(config, rows));
  return cache;
}

size_t KvCache::BlockBytes(const ModelConfig& config, int block_size, bool global, bool fp8) {
  const size_t element = fp8 ? 1 : sizeof(__nv_bfloat16);
  size_t bytes = 0;
  for (const LayerSpec& s : config.layers) {
    if (s.is_global() != global) continue;
    bytes += 2 * element * static_cast<size_t>(block_size) * s.num_kv_heads * s.head_dim;
  }
  return bytes;
}

}  // namespace gemma::cuda
