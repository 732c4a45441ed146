// How the engine gives sequences KV memory: per-sequence slots kept by the
// backend, or paged blocks from a KvBlockManager (with prefix caching). The
// scheduler talks to this interface only.
//
// Thread-safety: scheduler thread only, except CheckCapacity (any thread: it
// reads only configuration fixed at construction).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "engine/core/backend.h"
#include "engine/core/sequence.h"
#include "engine/kv/kv_block_manager.h"

namespace gemma {

struct KvUsage {
  int total_blocks = 0;   // slots in slot mode
  int free_blocks = 0;
  int block_size = 0;     // 0 in slot mode
  PrefixCacheStats prefix;
  int sliding_total_blocks = 0;  // paged mode with sliding layers
  int sliding_free_blocks = 0;
};

class KvAllocator {
 public:
  virtual ~KvAllocator() = default;
  // OK when the whole pool can hold a sequence of `num_tokens` tokens (as
  // Reserve counts blocks); otherwise INVALID_ARGUMENT naming the need and
  // the pool: such a sequence could never finish.
  virtual absl::Status CheckCapacity(int64_t num_tokens) const = 0;
  // Gives the sequence a slot and whatever cached prefix it can reuse
  // (sets seq.slot and seq.num_computed) when the KV for its known tokens is
  // available now. False: not now, nothing changed.
  virtual bool Admit(Sequence& seq) = 0;
  // Backs positions [0, new_length). False: not now, nothing changed.
  virtual bool Reserve(Sequence& seq, int new_length) = 0;
  // KV of positions [0, seq.num_computed) is written.
  virtual void Commit(Sequence& seq) = 0;
  // Frees everything the sequence holds (cached blocks stay reusable).
  virtual void Release(Sequence& seq) = 0;
  // Adds the sequence's KV view to its chunk.
  virtual void Describe(const Sequence& seq, SequenceChunk* chunk) const = 0;
  virtual KvUsage Usage() const = 0;
};

// `max_chunk_tokens`: the most tokens one sequence computes in a step.
std::unique_ptr<KvAllocator> MakeKvAllocator(Backend* backend, int max_chunk_tokens);

// The block manager's view of a paged backend's pools (a pool the model has
// no layer for counts as absent). REQUIRES: backend.kv_cache_spec().block_size > 0.
KvBlockConfig KvBlockConfigOf(const Backend& backend);

}  // namespace gemma
