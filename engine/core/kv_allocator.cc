#include "engine/core/kv_allocator.h"

#include <vector>

namespace gemma {
namespace {

// Slot mode: the backend keeps one cache per slot, sized for max_context.
class SlotAllocator final : public KvAllocator {
 public:
  explicit SlotAllocator(Backend* backend) : backend_(backend) {
    for (int s = backend->max_slots() - 1; s >= 0; --s) free_.push_back(s);
  }
  bool Admit(Sequence& seq) override {
    if (free_.empty()) return false;
    seq.slot = free_.back();
    free_.pop_back();
    backend_->ResetSlot(seq.slot);
    seq.num_computed = 0;
    return true;
  }
  bool Reserve(Sequence&, int new_length) override { return new_length <= backend_->max_context(); }
  void Commit(Sequence&) override {}
  void Release(Sequence& seq) override {
    if (seq.slot < 0) return;
    backend_->ResetSlot(seq.slot);
    free_.push_back(seq.slot);
    seq.slot = -1;
  }
  void Describe(const Sequence&, SequenceChunk*) const override {}
  KvUsage Usage() const override {
    return {backend_->max_slots(), static_cast<int>(free_.size()), 0, {}};
  }

 private:
  Backend* backend_;
  std::vector<int> free_;
};

// Paged mode: slots only number the sequences of a step (they cap the batch);
// the KV lives in blocks of the manager's pools.
class PagedAllocator final : public KvAllocator {
 public:
  PagedAllocator(Backend* backend, const KvBlockConfig& config) : manager_(config) {
    for (int s = backend->max_slots() - 1; s >= 0; --s) free_slots_.push_back(s);
  }
  bool Admit(Sequence& seq) override {
    if (free_slots_.empty()) return false;
    const int cached = manager_.AcquirePrefix(seq.tokens, &seq.blocks);
    // Admit only when the rest of the known tokens fits, so a new sequence
    // does not immediately force a preemption.
    if (!manager_.CanReserve(seq.blocks, static_cast<int>(seq.tokens.size()) + 1)) {
      manager_.Release(&seq.blocks);
      return false;
    }
    seq.slot = free_slots_.back();
    free_slots_.pop_back();
    seq.num_computed = cached;
    return true;
  }
  bool Reserve(Sequence& seq, int new_length) override { return manager_.Reserve(&seq.blocks, new_length); }
  void Commit(Sequence& seq) override { manager_.Commit(&seq.blocks, seq.tokens, seq.num_computed); }
  void Release(Sequence& seq) override {
    manager_.Release(&seq.blocks);
    if (seq.slot >= 0) free_slots_.push_back(seq.slot);
    seq.slot = -1;
  }
  void Describe(const Sequence& seq, SequenceChunk* chunk) const override {
    chunk->global_blocks = seq.blocks.global;
    chunk->sliding_blocks = seq.blocks.sliding;
  }
  KvUsage Usage() const override {
    const KvBlockConfig& c = manager_.config();
    return {c.num_global_blocks, manager_.num_free_global(), c.block_size, manager_.prefix_stats()};
  }

 private:
  KvBlockManager manager_;
  std::vector<int> free_slots_;
};

}  // namespace

std::unique_ptr<KvAllocator> MakeKvAllocator(Backend* backend) {
  const KvCacheSpec spec = backend->kv_cache_spec();
  if (spec.block_size <= 0) return std::make_unique<SlotAllocator>(backend);
  const ModelConfig& config = backend->config();
  bool any_sliding = false, any_global = false;
  for (const LayerSpec& l : config.layers) (l.is_global() ? any_global : any_sliding) = true;
  KvBlockConfig kv;
  kv.block_size = spec.block_size;
  kv.sliding_window = any_sliding ? config.sliding_window : 0;
  kv.num_global_blocks = any_global ? spec.num_global_blocks : 0;
  kv.num_sliding_blocks = any_sliding ? spec.num_sliding_blocks : 0;
  return std::make_unique<PagedAllocator>(backend, kv);
}

}  // namespace gemma
