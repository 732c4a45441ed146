#include "engine/kv/block_pool.h"

#include <cassert>

namespace gemma {

BlockPool::BlockPool(int num_blocks)
    : refs_(num_blocks, 0), hash_of_(num_blocks), evictable_pos_(num_blocks), is_evictable_(num_blocks, false) {
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int BlockPool::Allocate() {
  int block;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    block = evictable_.front();
    evictable_.pop_front();
    is_evictable_[block] = false;
    Forget(block);
  } else {
    return -1;
  }
  refs_[block] = 1;
  return block;
}

void BlockPool::Ref(int block) {
  if (refs_[block]++ == 0 && is_evictable_[block]) {
    evictable_.erase(evictable_pos_[block]);
    is_evictable_[block] = false;
  }
}

void BlockPool::Unref(int block) {
  assert(refs_[block] > 0);
  if (--refs_[block] > 0) return;
  if (hash_of_[block]) {
    evictable_.push_back(block);
    evictable_pos_[block] = std::prev(evictable_.end());
    is_evictable_[block] = true;
  } else {
    free_.push_back(block);
  }
}

void BlockPool::Register(int block, uint64_t hash) {
  if (hash_of_[block] || by_hash_.count(hash)) return;
  hash_of_[block] = hash;
  by_hash_[hash] = block;
}

std::optional<int> BlockPool::Lookup(uint64_t hash) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::Forget(int block) {
  if (!hash_of_[block]) return;
  by_hash_.erase(*hash_of_[block]);
  hash_of_[block].reset();
}

}  // namespace gemma
