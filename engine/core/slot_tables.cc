#include "engine/core/slot_tables.h"

#include "absl/strings/str_cat.h"
#include "engine/core/kv_allocator.h"

namespace gemma {

absl::StatusOr<SlotTables> SlotTables::For(const Backend& backend) {
  if (backend.kv_cache_spec().block_size <= 0)
    return absl::FailedPreconditionError(
        absl::StrCat("slot tables: the ", backend.name(), " backend has no paged KV cache"));
  return SlotTables(KvBlockConfigOf(backend), backend.max_slots());
}

absl::Status SlotTables::Attach(SequenceChunk& chunk) {
  if (chunk.slot < 0 || chunk.slot >= static_cast<int>(slots_.size()))
    return absl::InvalidArgumentError(absl::StrCat("slot tables: slot ", chunk.slot, " out of range"));
  Slot& s = slots_[chunk.slot];
  if (chunk.start_position != length(chunk.slot))
    return absl::InvalidArgumentError(absl::StrCat("slot tables: slot ", chunk.slot, " holds ", length(chunk.slot),
                                                   " tokens, chunk starts at ", chunk.start_position));
  const int end = chunk.start_position + static_cast<int>(chunk.token_ids.size());
  if (!manager_->Reserve(&s.table, end))
    return absl::ResourceExhaustedError(absl::StrCat("slot tables: slot ", chunk.slot, ": no blocks for positions up to ",
                                                     end, " (", manager_->num_free_global(), " global, ",
                                                     manager_->num_free_sliding(), " sliding blocks free)"));
  chunk.global_blocks = s.table.global;
  chunk.sliding_blocks = s.table.sliding;
  return absl::OkStatus();
}

void SlotTables::Commit(std::span<const SequenceChunk> chunks) {
  for (const SequenceChunk& c : chunks) {
    Slot& s = slots_[c.slot];
    s.tokens.insert(s.tokens.end(), c.token_ids.begin(), c.token_ids.end());
    manager_->Commit(&s.table, s.tokens, length(c.slot));
  }
}

absl::Status SlotTables::Forward(Backend& backend, std::span<SequenceChunk> chunks, std::span<const RowSampling> rows,
                                 ForwardResult* result) {
  for (SequenceChunk& c : chunks) {
    if (absl::Status st = Attach(c); !st.ok()) return st;
  }
  if (absl::Status st = backend.Forward(chunks, rows, result); !st.ok()) return st;
  Commit(chunks);
  return absl::OkStatus();
}

void SlotTables::Reset(int slot) {
  if (slot < 0 || slot >= static_cast<int>(slots_.size())) return;
  manager_->Release(&slots_[slot].table);
  slots_[slot].tokens.clear();
}

}  // namespace gemma
