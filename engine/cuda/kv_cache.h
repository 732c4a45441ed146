// The KV cache of every layer on the device, in attention.h's paged view:
// two block pools, [num_blocks * block_size, num_kv_heads, head_dim] bf16
// (or E4M3: fp8) per layer for K and for V; global layers draw on the
// global pool, sliding layers on the sliding pool (the engine's
// KvBlockManager hands out block ids of both and releases sliding blocks
// that leave the window).
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
  int capacity = 0;    // rows in the pool: num_blocks * block_size
  int num_blocks = 0;
};

class KvCache {
 public:
  // fp8: E4M3 elements (one byte) instead of bf16.
  static absl::StatusOr<KvCache> CreatePaged(const ModelConfig& config, int block_size,
                                             int num_global_blocks, int num_sliding_blocks, bool fp8 = false);
  // Device bytes of one block of every global (or every sliding) layer.
  static size_t BlockBytes(const ModelConfig& config, int block_size, bool global, bool fp8 = false);

  const LayerKv& layer(int l) const { return layers_[l]; }
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
  int block_size_ = 0;
  bool fp8_ = false;
  int num_global_blocks_ = 0, num_sliding_blocks_ = 0;
};

}  // namespace gemma::cuda
