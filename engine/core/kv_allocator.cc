#include "engine/core/kv_allocator.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace gemma {
namespace {

// Slot mode: the backend keeps one cache per slot, sized for max_context.
class SlotAllocator final : public KvAllocator {
 public:
  explicit SlotAllocator(Backend* backend) : backend_(backend) {
    for (int s = backend->max_slots() - 1; s >= 0; --s) free_.push_back(s);
  }
  // Every slot holds max_context positions, which request validation checks.
  absl::Status CheckCapacity(int64_t) const override { return absl::OkStatus(); }
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
  PagedAllocator(Backend* backend, const KvBlockConfig& config, int max_chunk_tokens)
      : manager_(config), max_chunk_tokens_(max_chunk_tokens) {
    for (int s = backend->max_slots() - 1; s >= 0; --s) free_slots_.push_back(s);
  }
  absl::Status CheckCapacity(int64_t num_tokens) const override {
    const KvBlockConfig& c = manager_.config();
    const KvBlockNeed need = manager_.PeakNeed(num_tokens, max_chunk_tokens_);
    if (need.global > c.num_global_blocks)
      return absl::InvalidArgumentError(absl::StrCat(
          num_tokens, " tokens need ", need.global, " KV blocks; the pool has ", c.num_global_blocks, " (",
          int64_t{c.num_global_blocks} * c.block_size, " tokens in blocks of ", c.block_size, ")"));
    if (need.sliding > c.num_sliding_blocks)
      return absl::InvalidArgumentError(absl::StrCat(
          num_tokens, " tokens need ", need.sliding, " sliding-window KV blocks (window ", c.sliding_window,
          " + one step of ", max_chunk_tokens_, " tokens, in blocks of ", c.block_size, "); the sliding pool has ",
          c.num_sliding_blocks));
    return absl::OkStatus();
  }
  bool Admit(Sequence& seq) override {
    if (free_slots_.empty()) return false;
    const int cached = manager_.AcquirePrefix(seq.tokens, &seq.blocks);
    // Admit only when the rest of the known tokens fits, so a new sequence
    // does not immediately force a preemption. Sliding blocks count up to
    // the sequence's peak only: a prompt longer than the sliding pool must
    // still get in.
    if (!manager_.CanAdmit(seq.blocks, static_cast<int>(seq.tokens.size()) + 1, max_chunk_tokens_)) {
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
    return {c.num_global_blocks, manager_.num_free_global(), c.block_size, manager_.prefix_stats(),
            c.num_sliding_blocks, manager_.num_free_sliding()};
  }

 private:
  KvBlockManager manager_;
  const int max_chunk_tokens_;
  std::vector<int> free_slots_;
};

}  // namespace

KvBlockConfig KvBlockConfigOf(const Backend& backend) {
  const KvCacheSpec spec = backend.kv_cache_spec();
  const ModelConfig& config = backend.config();
  bool any_sliding = false, any_global = false;
  for (const LayerSpec& l : config.layers) (l.is_global() ? any_global : any_sliding) = true;
  KvBlockConfig kv;
  kv.block_size = spec.block_size;
  kv.sliding_window = any_sliding ? config.sliding_window : 0;
  kv.num_global_blocks = any_global ? spec.num_global_blocks : 0;
  kv.num_sliding_blocks = any_sliding ? spec.num_sliding_blocks : 0;
  return kv;
}

std::unique_ptr<KvAllocator> MakeKvAllocator(Backend* backend, int max_chunk_tokens) {
  if (backend->kv_cache_spec().block_size <= 0) return std::make_unique<SlotAllocator>(backend);
  return std::make_unique<PagedAllocator>(backend, KvBlockConfigOf(*backend), max_chunk_tokens);
}

}  // namespace gemma
