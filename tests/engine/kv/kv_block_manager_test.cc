#include "engine/kv/kv_block_manager.h"

#include <numeric>

#include "gtest/gtest.h"

namespace gemma {
namespace {

std::vector<int32_t> Tokens(int n, int offset = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), 100 + offset);
  return t;
}

TEST(BlockPoolTest, CachedBlocksAreReusedOrEvictedLeastRecentFirst) {
  BlockPool pool(2);
  const int a = pool.Allocate(), b = pool.Allocate();
  EXPECT_EQ(pool.Allocate(), -1);
  pool.Register(a, 11);
  pool.Register(b, 22);
  pool.Unref(a);
  pool.Unref(b);
  EXPECT_EQ(pool.num_available(), 2);
  EXPECT_EQ(pool.num_cached(), 2);
  ASSERT_EQ(pool.Lookup(22), b);
  pool.Ref(b);  // a hit takes it out of the evictable list
  EXPECT_EQ(pool.num_cached(), 1);
  EXPECT_EQ(pool.Allocate(), a);  // evicts the only cached block
  EXPECT_FALSE(pool.Lookup(11).has_value());
  EXPECT_EQ(pool.Lookup(22), b);
}

TEST(KvBlockManagerTest, SlidingBlocksLeavingTheWindowAreReleased) {
  KvBlockManager m({/*block_size=*/4, /*sliding_window=*/8, /*global=*/16, /*sliding=*/16});
  BlockTable t;
  const auto tokens = Tokens(20);
  ASSERT_TRUE(m.Reserve(&t, 20));
  EXPECT_EQ(m.num_free_global(), 11);
  m.Commit(&t, tokens, 20);
  // The next query (position 20) reads positions >= 13: blocks 0..2 are done.
  EXPECT_EQ(t.sliding[0], -1);
  EXPECT_EQ(t.sliding[2], -1);
  EXPECT_GE(t.sliding[3], 0);
  EXPECT_EQ(t.hashes.size(), 5u);
  EXPECT_EQ(m.num_free_sliding(), 14);  // 5 taken, 3 released (cached, so available again)
  m.Release(&t);
  EXPECT_EQ(m.num_free_global(), 16);
}

TEST(KvBlockManagerTest, PrefixReuseNeedsTheSlidingWindowBeforeTheMatch) {
  KvBlockManager m({4, 8, 32, 32});
  BlockTable first;
  const auto tokens = Tokens(40);
  ASSERT_TRUE(m.Reserve(&first, 40));
  m.Commit(&first, tokens, 40);
  m.Release(&first);
  // Same 40 tokens + more: global blocks 0..9 are cached, but sliding blocks
  // 0..6 were released and cached too, so the whole prefix is reusable.
  std::vector<int32_t> longer = tokens;
  longer.push_back(7);
  BlockTable second;
  EXPECT_EQ(m.AcquirePrefix(longer, &second), 40);
  m.Release(&second);
  // Evict everything, then cache only a sequence's tail: a 12-token prefix
  // needs sliding blocks 1..2 (positions >= 5), which were evicted.
  KvBlockManager small({4, 8, 16, 4});
  BlockTable t;
  const auto long_tokens = Tokens(24);
  ASSERT_TRUE(small.Reserve(&t, 8));
  small.Commit(&t, long_tokens, 8);
  ASSERT_TRUE(small.Reserve(&t, 16));
  small.Commit(&t, long_tokens, 16);
  ASSERT_TRUE(small.Reserve(&t, 24));
  small.Commit(&t, long_tokens, 24);
  small.Release(&t);
  BlockTable probe;
  std::vector<int32_t> prefix(long_tokens.begin(), long_tokens.begin() + 13);
  const int cached = small.AcquirePrefix(prefix, &probe);
  // Sliding blocks 0 and 1 were evicted to make room for blocks 4 and 5, and
  // every shorter match needs one of them.
  EXPECT_EQ(cached, 0);
  small.Release(&probe);
}

TEST(KvBlockManagerTest, MatchLeavesOneTokenToCompute) {
  KvBlockManager m({4, 0, 8, 0});
  BlockTable t;
  const auto tokens = Tokens(8);
  ASSERT_TRUE(m.Reserve(&t, 8));
  m.Commit(&t, tokens, 8);
  m.Release(&t);
  BlockTable again;
  EXPECT_EQ(m.AcquirePrefix(tokens, &again), 4);  // not 8: the last token's logits are needed
  EXPECT_EQ(m.prefix_stats().hits, 4);
  EXPECT_EQ(m.prefix_stats().queries, 8);
  m.Release(&again);
}

TEST(KvBlockManagerTest, ReserveFailsWithoutChangingAnything) {
  KvBlockManager m({4, 8, 3, 3});
  BlockTable t;
  EXPECT_FALSE(m.Reserve(&t, 13));
  EXPECT_TRUE(t.global.empty());
  EXPECT_EQ(m.num_free_global(), 3);
  EXPECT_TRUE(m.Reserve(&t, 12));
  EXPECT_FALSE(m.CanReserve(t, 13));
}

}  // namespace
}  // namespace gemma
