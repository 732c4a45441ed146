// A rank's host model (the checkpoint's bytes sliced per the shard plan, what
// a GPU rank uploads) holds exactly the weights the CPU simulation of the
// sharding computes with (engine/cpu/cpu_shard.h, itself tested against the
// golden logits), and its config has the shard's widths.
#include "engine/parallel/rank_model.h"

#include <string>

#include "engine/cpu/cpu_shard.h"
#include "engine/cpu/cpu_weights.h"
#include "gtest/gtest.h"

namespace gemma::parallel {
namespace {

void ExpectSameWeights(const cpu::ModelParams& a, const cpu::ModelParams& b) {
  ASSERT_EQ(a.layers.size(), b.layers.size());
  EXPECT_EQ(a.embedding, b.embedding);
  EXPECT_EQ(a.final_norm, b.final_norm);
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const cpu::LayerParams &x = a.layers[l], &y = b.layers[l];
    EXPECT_EQ(x.wq, y.wq) << "layer " << l;
    EXPECT_EQ(x.wk, y.wk) << "layer " << l;
    EXPECT_EQ(x.wv, y.wv) << "layer " << l;
    EXPECT_EQ(x.wo, y.wo) << "layer " << l;
    EXPECT_EQ(x.w_gate, y.w_gate) << "layer " << l;
    EXPECT_EQ(x.w_up, y.w_up) << "layer " << l;
    EXPECT_EQ(x.w_down, y.w_down) << "layer " << l;
    EXPECT_EQ(x.q_norm, y.q_norm) << "layer " << l;
    EXPECT_EQ(x.input_norm, y.input_norm) << "layer " << l;
    EXPECT_EQ(x.post_feedforward_norm, y.post_feedforward_norm) << "layer " << l;
    EXPECT_EQ(x.layer_scalar, y.layer_scalar) << "layer " << l;
  }
}

TEST(RankModelTest, SlicedCheckpointEqualsTheSimulatedShards) {
  for (const char* dir : {GEMMA_MODELS_DIR "/gemma4-fortunes", GEMMA_TEST_DATA "/gemma4-tiny-random"}) {
    auto full = LoadModel(dir);
    ASSERT_TRUE(full.ok()) << full.status();
    const cpu::ModelParams whole = cpu::ConvertWeights(**full);
    for (int n : {2, 4}) {
      auto plan = MakeShardPlan((*full)->config, n);
      ASSERT_TRUE(plan.ok()) << plan.status();
      for (const RankShard& shard : plan->ranks) {
        auto rank = ShardModel(**full, shard);
        ASSERT_TRUE(rank.ok()) << rank.status();
        const ModelConfig& c = (*rank)->model.config;
        EXPECT_EQ(c.num_heads, (*full)->config.num_heads / n);
        EXPECT_EQ(c.intermediate_size, (*full)->config.intermediate_size / n);
        for (int l = 0; l < c.num_layers; ++l) EXPECT_EQ(c.layers[l].num_kv_heads, shard.layers[l].kv_heads.size);
        // The embedding stays whole on a GPU rank (lookup and tied LM head).
        cpu::ModelParams want = cpu::ShardWeights(whole, (*full)->config, shard);
        want.embedding = whole.embedding;
        SCOPED_TRACE(std::string(dir) + " N=" + std::to_string(n) + " rank " + std::to_string(shard.rank));
        ExpectSameWeights(cpu::ConvertWeights((*rank)->model), want);
      }
    }
  }
}

}  // namespace
}  // namespace gemma::parallel
