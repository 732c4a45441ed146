// Paged KV accounting for Gemma 4's hybrid cache.
//
// Global layers keep every position: a sequence's `global` table maps block
// b to the block holding positions [b*B, (b+1)*B). Sliding layers only ever
// read the last `window` positions: their `sliding` table has the same shape,
// but blocks that left the window are released (entry -1), so a sequence
// holds at most ceil((window - 1 + chunk) / B) + 1 sliding blocks (PeakNeed).
//
// Prefix cache: every full block of committed tokens gets a chain hash (its
// tokens and all before it) in both pools. A new request reuses the longest
// prefix of k blocks whose global blocks are all cached AND whose sliding
// blocks covering the window before position k*B are still cached — the
// only case where reuse is provably identical, since sliding KV older than
// the window is gone. Matches are capped so at least one token is computed
// (its logits are needed).
//
// Thread-safety: not thread-safe; owned by the engine's scheduler thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv/block_pool.h"

namespace gemma {

struct KvBlockConfig {
  int block_size = 16;          // tokens per block
  int sliding_window = 0;       // 0: the model has no sliding layers
  int num_global_blocks = 0;    // 0: the model has no global layers
  int num_sliding_blocks = 0;
};

struct BlockTable {
  std::vector<int32_t> global;   // block per B positions; global layers
  std::vector<int32_t> sliding;  // same shape; -1 where released
  std::vector<uint64_t> hashes;  // chain hash of each full committed block
  int num_tokens = 0;            // positions backed by blocks
};

// Blocks of each pool one sequence holds at once.
struct KvBlockNeed {
  int64_t global = 0;
  int64_t sliding = 0;
};

struct PrefixCacheStats {
  int64_t queries = 0;          // prompt tokens looked up
  int64_t hits = 0;             // prompt tokens served from the cache
};

class KvBlockManager {
 public:
  explicit KvBlockManager(const KvBlockConfig& config);

  const KvBlockConfig& config() const { return config_; }
  int num_free_global() const { return global_.num_available(); }
  int num_free_sliding() const { return sliding_.num_available(); }
  const PrefixCacheStats& prefix_stats() const { return stats_; }

  // The most blocks of each pool a sequence of `length` tokens ever holds
  // when each step computes at most `max_chunk_tokens` of them: global
  // blocks for every position, sliding blocks for the window before a
  // chunk plus the chunk (Commit releases the rest). A pool smaller than
  // this can never finish the sequence. Reads only the configuration.
  KvBlockNeed PeakNeed(int64_t length, int max_chunk_tokens) const;

  // For an empty table: takes the longest reusable cached prefix of `tokens`
  // and returns its length in tokens (a multiple of the block size).
  int AcquirePrefix(std::span<const int32_t> tokens, BlockTable* table);
  // Whether Reserve(table, new_length) would succeed now.
  bool CanReserve(const BlockTable& table, int new_length) const;
  // Whether a sequence holding `table` can grow to `length` tokens without
  // waiting for blocks: the global blocks of all of them are available now,
  // and the sliding blocks of its peak (PeakNeed), not of every position,
  // since those leave the window as it goes.
  bool CanAdmit(const BlockTable& table, int length, int max_chunk_tokens) const;
  // Backs positions [0, new_length) with blocks. Returns false, changing
  // nothing, when a pool is out of blocks.
  bool Reserve(BlockTable* table, int new_length);
  // KV of positions [0, length) is written: registers hashes of newly full
  // blocks (`tokens` are the sequence's tokens, at least `length` of them)
  // and releases sliding blocks no later query can read.
  void Commit(BlockTable* table, std::span<const int32_t> tokens, int length);
  // Returns every block; hashed ones stay cached for reuse.
  void Release(BlockTable* table);

 private:
  int64_t NumBlocks(int64_t length) const { return (length + config_.block_size - 1) / config_.block_size; }
  // First block a query at `position` reads on sliding layers.
  int FirstLiveSlidingBlock(int position) const;
  // First sliding block the table still holds (the released ones before it).
  static int FirstHeldSlidingBlock(const BlockTable& table);
  bool has_global() const { return config_.num_global_blocks > 0; }
  bool has_sliding() const { return config_.sliding_window > 0; }

  KvBlockConfig config_;
  BlockPool global_, sliding_;
  PrefixCacheStats stats_;
};

}  // namespace gemma
