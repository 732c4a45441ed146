// Driving a backend without the engine's block manager: each slot gets a
// fixed run of blocks, the same numbers for both pools, and chunks that ask
// for logits (the parity tests compare them).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/backend.h"

namespace gemma::parity {

inline constexpr int kContext = 512, kBlock = 16, kBlocksPerSlot = kContext / kBlock;

inline std::vector<int32_t> BlocksOf(int slot) {
  std::vector<int32_t> b(kBlocksPerSlot);
  for (int i = 0; i < kBlocksPerSlot; ++i) b[i] = slot * kBlocksPerSlot + i;
  return b;
}

inline SequenceChunk Chunk(int slot, std::span<const int32_t> ids, int32_t start, bool all_logits,
                           const std::vector<int32_t>& blocks) {
  SequenceChunk c{slot, ids, start, all_logits};
  c.return_logits = true;
  c.global_blocks = blocks;
  c.sliding_blocks = blocks;
  return c;
}

// Max |a - b| over n values (one or more vocab rows).
inline double MaxAbsError(const float* a, const float* b, size_t n) {
  double err = 0;
  for (size_t i = 0; i < n; ++i) err = std::max(err, std::abs(double(a[i]) - b[i]));
  return err;
}

}  // namespace gemma::parity
