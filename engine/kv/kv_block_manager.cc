#include "engine/kv/kv_block_manager.h"

#include <algorithm>

namespace gemma {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

uint64_t ChainHash(uint64_t parent, std::span<const int32_t> block_tokens) {
  uint64_t h = Mix(parent, block_tokens.size());
  for (int32_t t : block_tokens) h = Mix(h, static_cast<uint32_t>(t));
  return h;
}

}  // namespace

KvBlockManager::KvBlockManager(const KvBlockConfig& config)
    : config_(config), global_(config.num_global_blocks), sliding_(config.num_sliding_blocks) {}

int KvBlockManager::FirstLiveSlidingBlock(int position) const {
  return std::max(0, position - config_.sliding_window + 1) / config_.block_size;
}

// The released sliding blocks (-1) are always a prefix of the table:
// AcquirePrefix fills only from the first live block on, Reserve appends and
// Commit releases from the front. So the first held one is found by bisection,
// and a step costs O(log n), not O(n), at any context length.
int KvBlockManager::FirstHeldSlidingBlock(const BlockTable& table) {
  return static_cast<int>(std::partition_point(table.sliding.begin(), table.sliding.end(),
                                               [](int32_t b) { return b < 0; }) -
                          table.sliding.begin());
}

int KvBlockManager::AcquirePrefix(std::span<const int32_t> tokens, BlockTable* table) {
  const int B = config_.block_size;
  stats_.queries += tokens.size();
  // Hash the full blocks, keeping at least one token to compute.
  const int max_blocks = (static_cast<int>(tokens.size()) - 1) / B;
  std::vector<uint64_t> hashes;
  uint64_t h = 0;
  for (int b = 0; b < max_blocks; ++b) hashes.push_back(h = ChainHash(h, tokens.subspan(b * B, B)));
  int k = 0;  // longest run of cached global blocks
  while (k < max_blocks && (!has_global() || global_.Lookup(hashes[k]))) ++k;
  // Shrink until the sliding blocks the next query reads are cached too.
  for (; k > 0 && has_sliding(); --k) {
    bool ok = true;
    for (int b = FirstLiveSlidingBlock(k * B); b < k && ok; ++b) ok = sliding_.Lookup(hashes[b]).has_value();
    if (ok) break;
  }
  table->global.assign(k, -1);
  table->sliding.assign(k, -1);
  for (int b = 0; b < k; ++b) {
    if (has_global()) {
      table->global[b] = *global_.Lookup(hashes[b]);
      global_.Ref(table->global[b]);
    }
    if (has_sliding() && b >= FirstLiveSlidingBlock(k * B)) {
      table->sliding[b] = *sliding_.Lookup(hashes[b]);
      sliding_.Ref(table->sliding[b]);
    }
  }
  table->hashes.assign(hashes.begin(), hashes.begin() + k);
  table->num_tokens = k * B;
  stats_.hits += k * B;
  return k * B;
}

KvBlockNeed KvBlockManager::PeakNeed(int64_t length, int max_chunk_tokens) const {
  KvBlockNeed need;
  if (has_global()) need.global = NumBlocks(length);
  if (has_sliding()) {
    // A chunk of n tokens starting at p reads from p - window + 1: blocks
    // floor((p - W + 1) / B) .. floor((p + n - 1) / B), at most
    // ceil((W - 1 + n) / B) + 1 of them.
    const int64_t chunk = std::min<int64_t>(std::max(1, max_chunk_tokens), length);
    need.sliding = std::min(NumBlocks(length), NumBlocks(config_.sliding_window - 1 + chunk) + 1);
  }
  return need;
}

bool KvBlockManager::CanReserve(const BlockTable& table, int new_length) const {
  const int64_t need = std::max<int64_t>(0, NumBlocks(new_length) - static_cast<int64_t>(table.global.size()));
  return (!has_global() || global_.num_available() >= need) && (!has_sliding() || sliding_.num_available() >= need);
}

bool KvBlockManager::CanAdmit(const BlockTable& table, int length, int max_chunk_tokens) const {
  const int64_t new_blocks = std::max<int64_t>(0, NumBlocks(length) - static_cast<int64_t>(table.global.size()));
  const int64_t held_sliding = static_cast<int64_t>(table.sliding.size()) - FirstHeldSlidingBlock(table);
  const int64_t sliding = std::min(new_blocks, PeakNeed(length, max_chunk_tokens).sliding - held_sliding);
  return (!has_global() || global_.num_available() >= new_blocks) &&
         (!has_sliding() || sliding_.num_available() >= sliding);
}

bool KvBlockManager::Reserve(BlockTable* table, int new_length) {
  if (!CanReserve(*table, new_length)) return false;
  while (static_cast<int64_t>(table->global.size()) < NumBlocks(new_length)) {
    table->global.push_back(has_global() ? global_.Allocate() : -1);
    table->sliding.push_back(has_sliding() ? sliding_.Allocate() : -1);
  }
  table->num_tokens = std::max(table->num_tokens, new_length);
  return true;
}

void KvBlockManager::Commit(BlockTable* table, std::span<const int32_t> tokens, int length) {
  const int B = config_.block_size;
  for (int b = static_cast<int>(table->hashes.size()); (b + 1) * B <= length; ++b) {
    const uint64_t parent = b == 0 ? 0 : table->hashes[b - 1];
    const uint64_t h = ChainHash(parent, tokens.subspan(b * B, B));
    table->hashes.push_back(h);
    if (has_global()) global_.Register(table->global[b], h);
    if (has_sliding() && table->sliding[b] >= 0) sliding_.Register(table->sliding[b], h);
  }
  if (!has_sliding()) return;
  const int first_live = std::min(FirstLiveSlidingBlock(length), static_cast<int>(table->sliding.size()));
  for (int b = FirstHeldSlidingBlock(*table); b < first_live; ++b) {
    sliding_.Unref(table->sliding[b]);
    table->sliding[b] = -1;
  }
}

void KvBlockManager::Release(BlockTable* table) {
  for (int32_t b : table->global)
    if (b >= 0 && has_global()) global_.Unref(b);
  for (int32_t b : table->sliding)
    if (b >= 0) sliding_.Unref(b);
  *table = BlockTable();
}

}  // namespace gemma
