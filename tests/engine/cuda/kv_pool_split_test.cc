// How the KV budget splits between the sliding-window and global pools
// (SplitKvBudget), on the 31B shape's block sizes. No GPU needed.
#include <gtest/gtest.h>

#include "engine/cuda/kv_cache.h"
#include "engine/cuda/kv_pools.h"
#include "engine/model/config.h"

namespace gemma::cuda {
namespace {

constexpr int kBlock = 16;

// The 31B's demand at max_context tokens, 64 slots, steps of 8 192 tokens.
KvPoolDemand Demand31B(int max_context, bool fp8) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(GEMMA_TEST_DATA "/gemma4-31b");
  EXPECT_TRUE(config.ok()) << config.status();
  KvPoolDemand d;
  d.global_block_bytes = KvCache::BlockBytes(*config, kBlock, true, fp8);
  d.sliding_block_bytes = KvCache::BlockBytes(*config, kBlock, false, fp8);
  d.max_slots = 64;
  d.sequence_global_blocks = (max_context + kBlock - 1) / kBlock;
  d.window_blocks = (config->sliding_window - 1 + kBlock - 1) / kBlock + 2;
  d.chunk_blocks = 8192 / kBlock;
  return d;
}

int RequestBlocks(int max_context) { return (std::min(max_context, kKvSplitRequestTokens) + kBlock - 1) / kBlock; }

int Concurrent(const KvPoolDemand& d, const KvPoolSplit& s, int tokens) {
  return ConcurrentSequences(d, s, kBlock, tokens);
}

double Bytes(const KvPoolDemand& d, const KvPoolSplit& s) {
  return double(s.num_global) * d.global_block_bytes + double(s.num_sliding) * d.sliding_block_bytes;
}

TEST(KvPoolSplit, AmpleMemoryGivesEverySlotItsWindowAndTheRestToTheGlobalPool) {
  const KvPoolDemand d = Demand31B(2112, true);
  const double budget = 85e9;  // the H200 at 0.92, fp8 weights
  const KvPoolSplit s = SplitKvBudget(d, budget, RequestBlocks(2112));
  EXPECT_EQ(s.num_sliding, 64 * d.window_blocks + d.chunk_blocks);
  EXPECT_EQ(Concurrent(d, s, 2112), 64);
  EXPECT_LE(Bytes(d, s), budget);
  EXPECT_GT(Bytes(d, s), budget - double(d.global_block_bytes));
}

// int4 weights with their fp8 copy on an 80 GB card: ~20 GB for the cache.
// Every slot's window would take it all and leave the global pool one
// sequence; the split runs dozens of whole sequences instead.
TEST(KvPoolSplit, TightMemoryRunsAsManyWholeSequencesAsFit) {
  const KvPoolDemand d = Demand31B(2112, true);
  const double budget = 20e9;
  const KvPoolSplit s = SplitKvBudget(d, budget, RequestBlocks(2112));
  const double per_sequence = d.window_blocks * double(d.sliding_block_bytes) +
                              d.sequence_global_blocks * double(d.global_block_bytes);
  const int most = static_cast<int>((budget - d.chunk_blocks * double(d.sliding_block_bytes)) / per_sequence);
  EXPECT_GE(most, 30);
  EXPECT_EQ(Concurrent(d, s, 2112), most);
  EXPECT_LE(Bytes(d, s), budget);
  EXPECT_GE(s.num_global, d.sequence_global_blocks);
}

TEST(KvPoolSplit, LongMaxContextSizesSlotsForRequestsAndKeepsOneWholeSequence) {
  const KvPoolDemand d = Demand31B(262144, false);
  const double budget = 74e9;  // the H200 at 0.92, bf16 weights and cache
  const KvPoolSplit s = SplitKvBudget(d, budget, RequestBlocks(262144));
  EXPECT_GE(s.num_global, d.sequence_global_blocks + (Concurrent(d, s, kKvSplitRequestTokens) - 1) *
                                                         RequestBlocks(262144));
  EXPECT_GE(Concurrent(d, s, kKvSplitRequestTokens), 30);
  EXPECT_LT(Concurrent(d, s, kKvSplitRequestTokens), 64);
  EXPECT_LE(Bytes(d, s), budget);
}

TEST(KvPoolSplit, OneSequenceOfBudgetGivesOneSlot) {
  const KvPoolDemand d = Demand31B(2112, true);
  const double one = d.sequence_global_blocks * double(d.global_block_bytes) +
                     (d.window_blocks + d.chunk_blocks) * double(d.sliding_block_bytes);
  const KvPoolSplit s = SplitKvBudget(d, one + 1e6, RequestBlocks(2112));
  EXPECT_EQ(s.num_sliding, d.window_blocks + d.chunk_blocks);
  EXPECT_GE(s.num_global, d.sequence_global_blocks);
}

TEST(KvPoolSplit, ConcurrentSequencesCountsWindowsAndGlobalBlocks) {
  const KvPoolDemand d = Demand31B(2112, true);
  const int per_sequence = d.sequence_global_blocks;  // 132 blocks of 16 for 2 112 tokens
  KvPoolSplit s{10 * per_sequence, 20 * d.window_blocks + d.chunk_blocks};
  EXPECT_EQ(ConcurrentSequences(d, s, kBlock, 2112), 10);  // the global pool holds 10
  EXPECT_EQ(ConcurrentSequences(d, s, kBlock, 1024), 20);  // 20 windows
  EXPECT_EQ(ConcurrentSequences(d, s, kBlock, 1), 20);
  s.num_global = 1000 * per_sequence;
  s.num_sliding = 1000 * d.window_blocks + d.chunk_blocks;
  EXPECT_EQ(ConcurrentSequences(d, s, kBlock, 2112), 64);  // max_slots
  s.num_sliding = d.chunk_blocks + d.window_blocks - 1;
  EXPECT_EQ(ConcurrentSequences(d, s, kBlock, 2112), 0);
  EXPECT_EQ(ConcurrentSequences(d, s, kBlock, 0), 0);
}

TEST(KvPoolSplit, OnlyOneKindOfLayer) {
  KvPoolDemand global_only = Demand31B(2112, true);
  global_only.sliding_block_bytes = 0;
  const KvPoolSplit g = SplitKvBudget(global_only, 10e9, RequestBlocks(2112));
  EXPECT_EQ(g.num_sliding, 0);
  EXPECT_EQ(g.num_global, static_cast<int>(10e9 / global_only.global_block_bytes));
  KvPoolDemand sliding_only = Demand31B(2112, true);
  sliding_only.global_block_bytes = 0;
  const KvPoolSplit s = SplitKvBudget(sliding_only, 10e9, RequestBlocks(2112));
  EXPECT_EQ(s.num_global, 0);
  const int slots = static_cast<int>((10e9 - sliding_only.chunk_blocks * double(sliding_only.sliding_block_bytes)) /
                                     (sliding_only.window_blocks * double(sliding_only.sliding_block_bytes)));
  EXPECT_EQ(s.num_sliding, std::min(slots, 64) * sliding_only.window_blocks + sliding_only.chunk_blocks);
}

}  // namespace
}  // namespace gemma::cuda
