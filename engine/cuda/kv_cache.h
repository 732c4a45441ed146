// The KV cache of every layer on the device, in one of attention.h's views:
//
// - slots: [num_slots, capacity, num_kv_heads, head_dim] bf16 (or E4M3:
//   fp8) for K and for V. Global layers keep every position (capacity = max_context); sliding
//   layers keep a ring of window + max_chunk_tokens - 1 positions: enough
//   that a prefill chunk's oldest query still finds its whole window after
//   the chunk is appended, and never sized by the context length.
// - paged: two block pools, [num_blocks * block_size, num_kv_heads,
//   head_dim] per layer for K and for V; global layers draw on the global
//   pool, sliding layers on the sliding pool (the engine's KvBlockManager
//   hands out block ids of both and releases sliding blocks that leave the
//   window).
// Thread-safety: owned by the backend's thread.
#pragma once

#include <cuda_bf16.h>

#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/common/cuda_util.h"
#include "engine/model/config.h"

namespace gemma::cuda {

struct LayerKv {
  void* k = nullptr;   // bf16, or E4M3 codes (KvCache::fp8)
  void* v = nullptr;
  int capacity = 0;    // slots: positions per slot; paged: rows in the pool
  bool ring = false;   // slots only
  int num_blocks = 0;  // paged only
};

class KvCache {
 public:
  // fp8: E4M3 elements (one byte) instead of bf16.
  static absl::StatusOr<KvCache> Create(const ModelConfig& config, int num_slots, int max_context,
                                        int max_chunk_tokens, bool fp8 = false);
  static absl::StatusOr<KvCache> CreatePaged(const ModelConfig& config, int block_size,
                                             int num_global_blocks, int num_sliding_blocks, bool fp8 = false);
  // Device bytes of one block of every global (or every sliding) layer.
  static size_t BlockBytes(const ModelConfig& config, int block_size, bool global, bool fp8 = false);

  const LayerKv& layer(int l) const { return layers_[l]; }
  int num_slots() const { return num_slots_; }
  bool paged() const { return block_size_ > 0; }
  bool fp8() const { return fp8_; }
  int block_size() const { return block_size_; }
  int num_global_blocks() const { return num_global_blocks_; }
  int num_sliding_blocks() const { return num_sliding_blocks_; }
  size_t bytes() const { return buffer_.bytes(); }

 private:
  // Allocates K and V of `rows[l]` cache rows for every layer l.
  absl::Status Allocate(const ModelConfig& config, const std::vector<size_t>& rows);

  DeviceBuffer buffer_;
  std::vector<LayerKv> layers_;
  int num_slots_ = 0;
  int block_size_ = 0;
  bool fp8_ = false;
  int num_global_blocks_ = 0, num_sliding_blocks_ = 0;
};

}  // namespace gemma::cuda
