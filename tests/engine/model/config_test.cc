// config.json parsing: the three fixture configs, and every malformed case.
#include "engine/model/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tests/engine/model/test_util.h"

namespace gemma {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

json ConfigFortunes() { return test::ReadJson(test::FortunesDir() + "/config.json"); }
json ConfigTiny() { return test::ReadJson(test::TinyRandomDir() + "/config.json"); }

absl::StatusOr<ModelConfig> Parse(const json& config) {
  return ParseModelConfig(config.dump(), "config.json");
}

TEST(ModelConfigTest, Real31bShapes) {
  auto config = LoadModelConfig(test::Real31bDir());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "Gemma4ForConditionalGeneration");
  EXPECT_TRUE(config->multimodal);
  EXPECT_EQ(config->tensor_prefix(), "model.language_model.");
  EXPECT_EQ(config->vocab_size, 262144);
  EXPECT_EQ(config->hidden_size, 5376);
  EXPECT_EQ(config->intermediate_size, 21504);
  EXPECT_EQ(config->num_layers, 60);
  EXPECT_EQ(config->num_heads, 32);
  EXPECT_EQ(config->sliding_window, 1024);
  EXPECT_EQ(config->max_position_embeddings, 262144);
  EXPECT_FLOAT_EQ(config->rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(config->final_logit_softcap, 30.0f);
  EXPECT_EQ(config->hidden_activation, "gelu_pytorch_tanh");
  EXPECT_EQ(config->dtype, "bfloat16");
  EXPECT_EQ(config->pad_token_id, 0);
  EXPECT_EQ(config->bos_token_id, 2);
  // text_config 1, top-level [1, 106], generation_config [1, 106, 50]; deduped.
  EXPECT_THAT(config->eos_token_ids, ElementsAre(1, 106, 50));
  ASSERT_EQ(config->layers.size(), 60u);
  EXPECT_EQ(config->num_global_layers(), 10);
  EXPECT_EQ(config->max_head_dim(), 512);
  for (int l = 0; l < 60; ++l) {
    const LayerSpec& spec = config->layers[l];
    SCOPED_TRACE(l);
    if (l % 6 == 5) {
      EXPECT_TRUE(spec.is_global());
      EXPECT_EQ(spec.head_dim, 512);
      EXPECT_EQ(spec.num_kv_heads, 4);
      EXPECT_TRUE(spec.k_eq_v);
      EXPECT_FLOAT_EQ(spec.rope_theta, 1e6f);
      EXPECT_EQ(spec.rope_pairs, 64);
    } else {
      EXPECT_FALSE(spec.is_global());
      EXPECT_EQ(spec.head_dim, 256);
      EXPECT_EQ(spec.num_kv_heads, 16);
      EXPECT_FALSE(spec.k_eq_v);
      EXPECT_FLOAT_EQ(spec.rope_theta, 1e4f);
      EXPECT_EQ(spec.rope_pairs, 128);
    }
  }
}

TEST(ModelConfigTest, Real31bParameterCount) {
  auto config = LoadModelConfig(test::Real31bDir());
  ASSERT_TRUE(config.ok()) << config.status();
  // docs/gemma4.md: 30.70 B parameters, embedding 1.41 B.
  EXPECT_EQ(std::llround(config->num_parameters() / 1e7), 3070);
  EXPECT_EQ(std::llround(int64_t{config->vocab_size} * config->hidden_size / 1e7), 141);
}

TEST(ModelConfigTest, FortunesTextOnlyExplicitSchema) {
  auto config = LoadModelConfig(test::FortunesDir());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "Gemma4ForCausalLM");
  EXPECT_FALSE(config->multimodal);
  EXPECT_EQ(config->tensor_prefix(), "model.");
  EXPECT_EQ(config->vocab_size, 1024);
  EXPECT_EQ(config->hidden_size, 256);
  EXPECT_EQ(config->intermediate_size, 512);
  EXPECT_EQ(config->num_heads, 4);
  EXPECT_EQ(config->sliding_window, 64);
  EXPECT_EQ(config->dtype, "bfloat16");
  EXPECT_THAT(config->eos_token_ids, ElementsAre(1));
  ASSERT_EQ(config->layers.size(), 8u);
  for (int l = 0; l < 8; ++l) {
    const LayerSpec& spec = config->layers[l];
    const bool global = l == 3 || l == 7;
    EXPECT_EQ(spec.is_global(), global) << l;
    EXPECT_EQ(spec.head_dim, global ? 128 : 64) << l;
    EXPECT_EQ(spec.num_kv_heads, global ? 1 : 2) << l;
    EXPECT_EQ(spec.k_eq_v, global) << l;
    EXPECT_EQ(spec.rope_pairs, global ? 16 : 32) << l;
  }
}

TEST(ModelConfigTest, TinyRandomPerLayerSchema) {
  auto config = LoadModelConfig(test::TinyRandomDir());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->multimodal);
  EXPECT_EQ(config->hidden_size, 128);
  EXPECT_EQ(config->sliding_window, 16);
  // text_config.dtype is null: the top-level torch_dtype is the declaration.
  EXPECT_EQ(config->dtype, "bfloat16");
  EXPECT_THAT(config->eos_token_ids, ElementsAre(1, 6));
  ASSERT_EQ(config->layers.size(), 12u);
  for (int l = 0; l < 12; ++l) {
    const LayerSpec& spec = config->layers[l];
    const bool global = l == 5 || l == 11;
    EXPECT_EQ(spec.is_global(), global) << l;
    EXPECT_EQ(spec.head_dim, global ? 64 : 32) << l;
    EXPECT_EQ(spec.num_kv_heads, global ? 1 : 2) << l;
    EXPECT_EQ(spec.k_eq_v, global) << l;
    EXPECT_EQ(spec.rope_pairs, global ? 8 : 16) << l;
  }
}

TEST(ModelConfigTest, EosAsListInTextConfig) {
  json config = ConfigFortunes();
  config["eos_token_id"] = {1, 106, 1};
  auto parsed = Parse(config);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->eos_token_ids, ElementsAre(1, 106));
}

TEST(ModelConfigTest, BothSchemasAgreeingIsAccepted) {
  json config = ConfigTiny();
  config["text_config"]["global_head_dim"] = 64;
  config["text_config"]["num_global_key_value_heads"] = 1;
  EXPECT_TRUE(Parse(config).ok());
}

TEST(ModelConfigTest, LoadMissingDirectoryNamesFile) {
  auto config = LoadModelConfig("/nonexistent/model");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("/nonexistent/model/config.json"));
}

TEST(ModelConfigTest, BadGenerationConfigIsAnError) {
  test::TempDir dir;
  test::WriteJson(dir.File("config.json"), ConfigFortunes());
  test::WriteFile(dir.File("generation_config.json"), R"({"eos_token_id": "one"})");
  auto config = LoadModelConfig(dir.path());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("generation_config.json: eos_token_id must be token ids"));
}

}  // namespace
}  // namespace gemma
