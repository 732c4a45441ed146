// Block tables for code that drives a paged Backend directly, without the
// engine (benchmarks, parity tests): each slot holds one sequence that grows
// from position 0, backed by blocks of a KvBlockManager sized like the
// backend's pools and taken and released as the engine's paged allocator
// does (sliding blocks that leave the window are freed at Commit). No prefix
// reuse across sequences.
//
// A chunk's blocks are reserved whole, so the sliding pool must hold its
// window plus the chunk: feed prompts longer than the backend's step budget
// (BackendOptions::max_tokens_per_step, else its pass size) in pieces.
// Thread-safety: not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/kv/kv_block_manager.h"

namespace gemma {

class SlotTables {
 public:
  // FAILED_PRECONDITION for a backend without a paged cache.
  static absl::StatusOr<SlotTables> For(const Backend& backend);

  // Backs the chunk's positions in its slot and points its tables at the
  // slot's. INVALID_ARGUMENT when the chunk does not continue the slot's
  // sequence; RESOURCE_EXHAUSTED when a pool is out of blocks.
  absl::Status Attach(SequenceChunk& chunk);
  // The chunks' KV is written (after a Forward of them succeeded).
  void Commit(std::span<const SequenceChunk> chunks);
  // Attach every chunk, Backend::Forward, then Commit.
  absl::Status Forward(Backend& backend, std::span<SequenceChunk> chunks, std::span<const RowSampling> rows,
                       ForwardResult* result);
  // Frees the slot's blocks: its next chunk starts at position 0.
  void Reset(int slot);
  // Positions the slot's sequence holds.
  int length(int slot) const { return static_cast<int>(slots_[slot].tokens.size()); }

 private:
  struct Slot {
    BlockTable table;
    std::vector<int32_t> tokens;  // committed, for the block hashes
  };
  SlotTables(const KvBlockConfig& config, int num_slots)
      : manager_(std::make_unique<KvBlockManager>(config)), slots_(num_slots) {}

  std::unique_ptr<KvBlockManager> manager_;
  std::vector<Slot> slots_;
};

}  // namespace gemma
