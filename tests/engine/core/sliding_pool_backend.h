// Test double: a backend that reports a smaller sliding pool than it has.
// The CPU backend sizes both pools alike, while the CUDA backend's sliding
// pool holds only every slot's window (far fewer tokens than the global
// pool); this reproduces that shape on the CPU. The block ids the engine hands
// out stay below the reported count, so they are valid in the inner pools.
//
// Thread-safety: as the inner backend.
#pragma once

#include <memory>
#include <string>

#include "engine/core/backend.h"

namespace gemma::testing {

class SlidingPoolBackend final : public Backend {
 public:
  // num_sliding_blocks <= 0: report the inner pool unchanged.
  SlidingPoolBackend(std::unique_ptr<Backend> inner, int num_sliding_blocks)
      : inner_(std::move(inner)), num_sliding_blocks_(num_sliding_blocks) {}

  const ModelConfig& config() const override { return inner_->config(); }
  std::string name() const override { return inner_->name(); }
  int max_slots() const override { return inner_->max_slots(); }
  int max_context() const override { return inner_->max_context(); }
  KvCacheSpec kv_cache_spec() const override {
    KvCacheSpec spec = inner_->kv_cache_spec();
    if (num_sliding_blocks_ > 0 && num_sliding_blocks_ < spec.num_sliding_blocks)
      spec.num_sliding_blocks = num_sliding_blocks_;
    return spec;
  }
  int64_t kv_cache_bytes() const override { return inner_->kv_cache_bytes(); }
  void ResetSlot(int slot) override { inner_->ResetSlot(slot); }
  bool can_sample_on_device() const override { return inner_->can_sample_on_device(); }
  absl::Status Forward(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                       ForwardResult* result) override {
    return inner_->Forward(chunks, rows, result);
  }

 private:
  std::unique_ptr<Backend> inner_;
  int num_sliding_blocks_;
};

}  // namespace gemma::testing
