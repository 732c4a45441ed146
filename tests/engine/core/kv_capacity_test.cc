// The KV need the engine checks at submit (KvBlockManager::PeakNeed) against
// what Reserve/Commit really take: a lone sequence growing in random chunks
// never holds more, so a pool of exactly that size always finishes it; and
// admission asks for the peak, not for a sliding block per prompt position.
#include <algorithm>
#include <random>
#include <vector>

#include "engine/kv/kv_block_manager.h"
#include "gtest/gtest.h"

namespace gemma {
namespace {

int HeldSliding(const BlockTable& t) {
  return static_cast<int>(std::count_if(t.sliding.begin(), t.sliding.end(), [](int32_t b) { return b >= 0; }));
}

TEST(KvCapacityTest, LoneSequenceFitsAPoolOfExactlyItsPeakNeed) {
  std::mt19937 rng(7);
  int reached_peak = 0;  // the bound is tight, not just safe
  for (int trial = 0; trial < 300; ++trial) {
    KvBlockConfig c;
    c.block_size = 1 + rng() % 16;
    c.sliding_window = 1 + rng() % 80;
    const int max_chunk = 1 + rng() % 48;
    const int length = 1 + rng() % 400;
    const int prompt = 1 + rng() % length;
    c.num_global_blocks = c.num_sliding_blocks = 1;  // both kinds of layer
    const KvBlockNeed need = KvBlockManager(c).PeakNeed(length, max_chunk);
    c.num_global_blocks = static_cast<int>(need.global);
    c.num_sliding_blocks = static_cast<int>(need.sliding);
    KvBlockManager m(c);
    std::vector<int32_t> tokens(length);
    for (int& t : tokens) t = rng() % 50;
    BlockTable table;
    ASSERT_EQ(m.AcquirePrefix(std::span<const int32_t>(tokens).first(prompt), &table), 0);
    ASSERT_TRUE(m.CanAdmit(table, prompt + 1, max_chunk));
    int held_max = 0;
    // Prefill in chunks of at most max_chunk, then decode one token a step.
    for (int p = 0; p < length;) {
      const int n = p < prompt ? 1 + static_cast<int>(rng() % std::min(max_chunk, prompt - p)) : 1;
      ASSERT_TRUE(m.Reserve(&table, p + n))
          << "B=" << c.block_size << " W=" << c.sliding_window << " chunk=" << max_chunk << " p=" << p << " n=" << n;
      held_max = std::max(held_max, HeldSliding(table));
      p += n;
      m.Commit(&table, tokens, p);
    }
    EXPECT_LE(held_max, need.sliding);
    reached_peak += held_max == need.sliding;
    EXPECT_EQ(static_cast<int64_t>(table.global.size()), need.global);
    m.Release(&table);
    EXPECT_EQ(m.num_free_global(), c.num_global_blocks);
    EXPECT_EQ(m.num_free_sliding(), c.num_sliding_blocks);
  }
  EXPECT_GT(reached_peak, 30);
}

TEST(KvCapacityTest, PeakSlidingNeedIsAWindowPlusAChunk) {
  KvBlockConfig c{.block_size = 16, .sliding_window = 1024, .num_global_blocks = 1, .num_sliding_blocks = 1};
  KvBlockManager m(c);
  // The 31B's shape at --max-tokens-per-step 2048: ceil((1023 + 2048) / 16) + 1.
  EXPECT_EQ(m.PeakNeed(120000, 2048).sliding, 193);
  EXPECT_EQ(m.PeakNeed(120000, 2048).global, 7500);
  EXPECT_EQ(m.PeakNeed(10, 2048).sliding, 1);  // never more than the sequence's blocks
}

// The admission check of a long prompt asks the sliding pool for its peak:
// a prompt longer than the whole sliding pool (the GPU's pool holds every
// slot's window, ~70K tokens for the 31B at 64 slots) must still get in.
TEST(KvCapacityTest, PromptLongerThanTheSlidingPoolIsAdmitted) {
  KvBlockConfig c{.block_size = 8, .sliding_window = 64, .num_global_blocks = 200, .num_sliding_blocks = 40};
  KvBlockManager m(c);
  BlockTable table;
  std::vector<int32_t> prompt(1000, 5);
  m.AcquirePrefix(prompt, &table);
  EXPECT_FALSE(m.CanReserve(table, 1001));  // a sliding block per position: more than the pool
  EXPECT_TRUE(m.CanAdmit(table, 1001, 32));
  EXPECT_LE(m.PeakNeed(1001, 32).sliding, c.num_sliding_blocks);
  // The global blocks of every position must be free now.
  EXPECT_FALSE(m.CanAdmit(table, 8 * 200 + 1, 32));
}

}  // namespace
}  // namespace gemma
