// Per-slot KV cache of every layer, in attention.h's layout
// [num_slots, capacity, num_kv_heads, head_dim] bf16 for K and for V.
//
// Global layers keep every position (capacity = max_context). Sliding layers
// keep a ring of window + max_chunk_tokens - 1 positions: enough that a
// prefill chunk's oldest query still finds its whole window after the chunk
// is appended, and never sized by the context length.
// Thread-safety: owned by the backend's thread.
#pragma once

#include <cuda_bf16.h>

#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_util.h"
#include "engine/model/config.h"

namespace gemma::cuda {

struct LayerKv {
  __nv_bfloat16* k = nullptr;
  __nv_bfloat16* v = nullptr;
  int capacity = 0;  // positions per slot
  bool ring = false;
};

class KvCache {
 public:
  static absl::StatusOr<KvCache> Create(const ModelConfig& config, int num_slots, int max_context,
                                        int max_chunk_tokens);
  const LayerKv& layer(int l) const { return layers_[l]; }
  int num_slots() const { return num_slots_; }
  size_t bytes() const { return buffer_.bytes(); }

 private:
  DeviceBuffer buffer_;
  std::vector<LayerKv> layers_;
  int num_slots_ = 0;
};

}  // namespace gemma::cuda
