// A pool of fixed-size KV blocks with reference counts and a prefix cache.
//
// A block is free (refcount 0, no hash), in use (refcount > 0), or cached
// (refcount 0 with a hash: its contents are a known token prefix and it can
// be reused by a later request until it is evicted, least recently released
// first). Allocate() evicts cached blocks only when no free block is left.
//
// Thread-safety: not thread-safe; owned by the engine's scheduler thread.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace gemma {

class BlockPool {
 public:
  explicit BlockPool(int num_blocks);

  int num_blocks() const { return static_cast<int>(refs_.size()); }
  // Blocks Allocate() can still hand out (free + cached).
  int num_available() const { return static_cast<int>(free_.size() + evictable_.size()); }
  int num_cached() const { return static_cast<int>(evictable_.size()); }

  // A block with refcount 1, or -1 when none is available.
  int Allocate();
  void Ref(int block);
  // Drops one reference; at zero a hashed block becomes cached, others free.
  void Unref(int block);
  // Records that `block` holds the prefix identified by `hash` (replacing
  // nothing when another block already holds it).
  void Register(int block, uint64_t hash);
  // The block holding `hash`, if any. REQUIRES the caller to Ref() it before
  // the next Allocate().
  std::optional<int> Lookup(uint64_t hash) const;
  int refcount(int block) const { return refs_[block]; }

 private:
  void Forget(int block);
  std::vector<int> refs_;
  std::vector<std::optional<uint64_t>> hash_of_;
  std::vector<int> free_;
  std::list<int> evictable_;  // cached blocks, least recently released first
  std::vector<std::list<int>::iterator> evictable_pos_;
  std::vector<bool> is_evictable_;
  std::unordered_map<uint64_t, int> by_hash_;
};

}  // namespace gemma
