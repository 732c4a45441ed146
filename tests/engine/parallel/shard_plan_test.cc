// The tensor-parallel shard plan on the published 31B config and the
// fixtures' shapes: every rank's ranges tile the model's heads, columns and
// vocabulary; shapes that do not split are named in the error.
#include "engine/parallel/shard_plan.h"

#include <string>

#include "engine/model/config.h"
#include "gtest/gtest.h"

namespace gemma::parallel {
namespace {

ModelConfig Load(const std::string& dir) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// The ranks' ranges of one kind cover [0, n) in order without overlap.
template <typename Get>
void ExpectTiles(const ShardPlan& plan, int64_t n, Get get) {
  int64_t next = 0;
  for (const RankShard& r : plan.ranks) {
    EXPECT_EQ(get(r).begin, next) << "rank " << r.rank;
    EXPECT_GT(get(r).size, 0) << "rank " << r.rank;
    next = get(r).end();
  }
  EXPECT_EQ(next, n);
}

TEST(ShardPlanTest, Gemma31bSplitsHeadsKvHeadsColumnsAndVocabWithoutReplication) {
  const ModelConfig config = Load(GEMMA_TEST_DATA "/gemma4-31b");
  for (int n : {1, 2, 4}) {
    absl::StatusOr<ShardPlan> plan = MakeShardPlan(config, n);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->size, n);
    ASSERT_EQ(plan->ranks.size(), size_t(n));
    ExpectTiles(*plan, config.intermediate_size, [](const RankShard& r) { return r.intermediate; });
    ExpectTiles(*plan, config.vocab_size, [](const RankShard& r) { return r.vocab; });
    for (int l = 0; l < config.num_layers; ++l) {
      ExpectTiles(*plan, config.num_heads, [l](const RankShard& r) { return r.layers[l].q_heads; });
      // 16 sliding and 4 global KV heads: N <= 4 splits them, no copies.
      ExpectTiles(*plan, config.layers[l].num_kv_heads, [l](const RankShard& r) { return r.layers[l].kv_heads; });
    }
    EXPECT_EQ(plan->ranks[0].layers[0].kv_heads.size, 16 / n);  // layer 0 is sliding
    EXPECT_EQ(plan->ranks[0].layers[5].kv_heads.size, 4 / n);   // layer 5 is global
    EXPECT_EQ(plan->ranks[n - 1].intermediate.size, config.intermediate_size / n);
  }
}

// A query head of rank r reads KV head (head / group) of the model; the
// rank's KV range must hold it, at the same offset the rank's local
// grouping (local q / local kv) computes.
TEST(ShardPlanTest, EachRanksQueryHeadsReadItsOwnKvHeads) {
  for (const char* dir : {GEMMA_TEST_DATA "/gemma4-31b", GEMMA_TEST_DATA "/gemma4-tiny-random",
                          GEMMA_MODELS_DIR "/gemma4-fortunes"}) {
    const ModelConfig config = Load(dir);
    for (int n : {1, 2, 4}) {
      absl::StatusOr<ShardPlan> plan = MakeShardPlan(config, n);
      ASSERT_TRUE(plan.ok()) << dir << " N=" << n << ": " << plan.status();
      for (const RankShard& r : plan->ranks) {
        for (int l = 0; l < config.num_layers; ++l) {
          const LayerShard& s = r.layers[l];
          const int64_t group = config.num_heads / config.layers[l].num_kv_heads;
          const int64_t local_group = s.q_heads.size / s.kv_heads.size;
          for (int64_t h = s.q_heads.begin; h < s.q_heads.end(); ++h) {
            const int64_t kv = h / group;
            EXPECT_TRUE(s.kv_heads.Contains(kv)) << dir << " N=" << n << " rank " << r.rank << " layer " << l;
            EXPECT_EQ(s.kv_heads.begin + (h - s.q_heads.begin) / local_group, kv);
          }
        }
      }
    }
  }
}

TEST(ShardPlanTest, FewerKvHeadsThanRanksAreReplicated) {
  // tiny-random: global layers have one KV head; at N = 2 both ranks hold it.
  const ModelConfig config = Load(GEMMA_TEST_DATA "/gemma4-tiny-random");
  ASSERT_EQ(config.layers[5].num_kv_heads, 1);
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(config, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->ranks[0].layers[5].kv_heads, (Range{0, 1}));
  EXPECT_EQ(plan->ranks[1].layers[5].kv_heads, (Range{0, 1}));
  EXPECT_EQ(plan->ranks[1].layers[0].kv_heads, (Range{1, 1}));  // 2 sliding KV heads split
}

TEST(ShardPlanTest, VocabularySplitsUnevenly) {
  ModelConfig config = Load(GEMMA_MODELS_DIR "/gemma4-fortunes");
  config.vocab_size = 1027;
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(config, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectTiles(*plan, 1027, [](const RankShard& r) { return r.vocab; });
  EXPECT_EQ(plan->ranks[0].vocab.size, 257);
  EXPECT_EQ(plan->ranks[3].vocab.size, 256);
}

TEST(ShardPlanTest, ShapesThatDoNotSplitAreNamed) {
  const ModelConfig config = Load(GEMMA_TEST_DATA "/gemma4-31b");
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(config, 3);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("num_attention_heads 32"), std::string::npos) << plan.status();

  ModelConfig odd = config;
  odd.intermediate_size = 21506;
  plan = MakeShardPlan(odd, 4);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("intermediate_size 21506"), std::string::npos) << plan.status();

  // 12 KV heads over 8 ranks: 8 neither divides them nor is divided by them.
  ModelConfig kv = config;
  kv.num_heads = 48;
  kv.layers[0].num_kv_heads = 12;
  plan = MakeShardPlan(kv, 8);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("layer 0's 12 KV heads"), std::string::npos) << plan.status();

  EXPECT_FALSE(MakeShardPlan(config, 0).ok());
}

TEST(ShardPlanTest, ServerSizesAreOneTwoOrFour) {
  for (int n : {1, 2, 4}) EXPECT_TRUE(CheckTensorParallelSize(n).ok()) << n;
  for (int n : {0, 3, 8, -1}) {
    const absl::Status s = CheckTensorParallelSize(n);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("--tensor-parallel-size must be 1, 2 or 4, got " + std::to_string(n)), std::string::npos)
        << s;
  }
}

}  // namespace
}  // namespace gemma::parallel
