// config.json values that are present but wrong, contradictory or
// unsupported: one test per case, each checking the error names the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/model/config.h"
#include "tests/engine/model/test_util.h"

namespace gemma {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json Config31b() { return test::ReadJson(test::Real31bDir() + "/config.json"); }
json ConfigFortunes() { return test::ReadJson(test::FortunesDir() + "/config.json"); }
json ConfigTiny() { return test::ReadJson(test::TinyRandomDir() + "/config.json"); }

absl::Status ParseText(const std::string& text) {
  return ParseModelConfig(text, "config.json").status();
}
absl::Status Parse(const json& config) { return ParseText(config.dump()); }

#define EXPECT_ERROR(status, needle) EXPECT_THAT(std::string((status).message()), HasSubstr(needle))

TEST(ConfigInvalidTest, LayerTypesLengthMismatch) {
  json c = Config31b();
  c["text_config"]["layer_types"].erase(0);
  EXPECT_ERROR(Parse(c), "text_config.layer_types has 59 entries but num_hidden_layers is 60");
}

TEST(ConfigInvalidTest, LayerTypeUnknown) {
  json c = Config31b();
  c["text_config"]["layer_types"][4] = "local_attention";
  EXPECT_ERROR(Parse(c), "text_config.layer_types[4] is \"local_attention\"");
}

TEST(ConfigInvalidTest, PerLayerConfigKeyForSlidingLayer) {
  json c = ConfigTiny();
  c["text_config"]["per_layer_config"]["03"] = {{"head_dim", 64}};
  EXPECT_ERROR(Parse(c), "text_config.per_layer_config.03 names sliding layer 3");
}

TEST(ConfigInvalidTest, PerLayerConfigKeyOutOfRange) {
  json c = ConfigTiny();
  c["text_config"]["per_layer_config"]["12"] = {{"head_dim", 64}};
  EXPECT_ERROR(Parse(c), "text_config.per_layer_config.12 is not a layer index in [0, 12)");
}

TEST(ConfigInvalidTest, PerLayerConfigKeyNotANumber) {
  json c = ConfigTiny();
  c["text_config"]["per_layer_config"]["-5"] = {{"head_dim", 64}};
  EXPECT_ERROR(Parse(c), "text_config.per_layer_config.-5 is not a layer index");
}

TEST(ConfigInvalidTest, PerLayerConfigSameLayerTwice) {
  json c = ConfigTiny();
  c["text_config"]["per_layer_config"]["5"] = {{"head_dim", 64}};
  EXPECT_ERROR(Parse(c), "repeats layer 5");
}

TEST(ConfigInvalidTest, PerLayerConfigUnknownSetting) {
  json c = ConfigTiny();
  c["text_config"]["per_layer_config"]["05"]["sliding_window"] = 8;
  auto status = Parse(c);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_ERROR(status, "text_config.per_layer_config.05.sliding_window");
}

TEST(ConfigInvalidTest, PerLayerConfigContradictsGlobalHeadDim) {
  json c = ConfigTiny();
  c["text_config"]["global_head_dim"] = 128;
  EXPECT_ERROR(Parse(c), "text_config.global_head_dim is 128 but per_layer_config gives 64");
}

TEST(ConfigInvalidTest, PerLayerConfigContradictsGlobalKvHeads) {
  json c = ConfigTiny();
  c["text_config"]["num_global_key_value_heads"] = 2;
  EXPECT_ERROR(Parse(c), "text_config.num_global_key_value_heads is 2 but per_layer_config");
}

TEST(ConfigInvalidTest, HeadDimZero) {
  json c = Config31b();
  c["text_config"]["head_dim"] = 0;
  EXPECT_ERROR(Parse(c), "text_config.head_dim must be in [1, 4096], got 0");
}

TEST(ConfigInvalidTest, GlobalHeadDimNegative) {
  json c = Config31b();
  c["text_config"]["global_head_dim"] = -512;
  EXPECT_ERROR(Parse(c), "text_config.global_head_dim must be in [1, 4096], got -512");
}

TEST(ConfigInvalidTest, HeadDimOdd) {
  json c = Config31b();
  c["text_config"]["head_dim"] = 255;
  EXPECT_ERROR(Parse(c), "text_config.head_dim must be even");
}

TEST(ConfigInvalidTest, HeadsNotDivisibleByKvHeads) {
  json c = Config31b();
  c["text_config"]["num_key_value_heads"] = 12;
  EXPECT_ERROR(Parse(c), "text_config.num_attention_heads (32) is not divisible by the 12");
}

TEST(ConfigInvalidTest, HeadsNotDivisibleByGlobalKvHeads) {
  json c = Config31b();
  c["text_config"]["num_global_key_value_heads"] = 3;
  EXPECT_ERROR(Parse(c), "num_global_key_value_heads");
}

TEST(ConfigInvalidTest, UnknownRopeType) {
  json c = Config31b();
  c["text_config"]["rope_parameters"]["sliding_attention"]["rope_type"] = "yarn";
  auto status = Parse(c);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_ERROR(status, "text_config.rope_parameters.sliding_attention.rope_type is \"yarn\"");
}

TEST(ConfigInvalidTest, DefaultRopeWithPartialFactor) {
  json c = Config31b();
  c["text_config"]["rope_parameters"]["sliding_attention"]["partial_rotary_factor"] = 0.5;
  EXPECT_ERROR(Parse(c), "rope_parameters.sliding_attention.partial_rotary_factor");
}

TEST(ConfigInvalidTest, PartialFactorNotWholePairs) {
  json c = Config31b();
  c["text_config"]["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 0.3;
  EXPECT_ERROR(Parse(c), "rope_parameters.full_attention.partial_rotary_factor times head_dim");
}

TEST(ConfigInvalidTest, PartialFactorAboveOne) {
  json c = Config31b();
  c["text_config"]["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 2.0;
  EXPECT_ERROR(Parse(c), "partial_rotary_factor must be in (0, 1]");
}

TEST(ConfigInvalidTest, RopeThetaNotPositive) {
  json c = Config31b();
  c["text_config"]["rope_parameters"]["full_attention"]["rope_theta"] = 0;
  EXPECT_ERROR(Parse(c), "text_config.rope_parameters.full_attention.rope_theta must be > 1");
}

TEST(ConfigInvalidTest, HiddenActivationNotGeluTanh) {
  json c = Config31b();
  c["text_config"]["hidden_activation"] = "silu";
  EXPECT_ERROR(Parse(c), "text_config.hidden_activation is \"silu\"");
}

TEST(ConfigInvalidTest, PerLayerEmbeddingsUnsupported) {
  json c = Config31b();
  c["text_config"]["hidden_size_per_layer_input"] = 256;
  auto status = Parse(c);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_ERROR(status, "text_config.hidden_size_per_layer_input is not 0 (unsupported)");
}

TEST(ConfigInvalidTest, MoeUnsupported) {
  json c = Config31b();
  c["text_config"]["enable_moe_block"] = true;
  EXPECT_ERROR(Parse(c), "text_config.enable_moe_block is true (unsupported)");
}

TEST(ConfigInvalidTest, KvSharingUnsupported) {
  json c = Config31b();
  c["text_config"]["num_kv_shared_layers"] = 4;
  EXPECT_ERROR(Parse(c), "text_config.num_kv_shared_layers is not 0 (unsupported)");
}

TEST(ConfigInvalidTest, DoubleWideMlpUnsupported) {
  json c = Config31b();
  c["text_config"]["use_double_wide_mlp"] = true;
  EXPECT_ERROR(Parse(c), "text_config.use_double_wide_mlp is true (unsupported)");
}

TEST(ConfigInvalidTest, UntiedEmbeddingsUnsupported) {
  json c = ConfigFortunes();
  c["tie_word_embeddings"] = false;
  EXPECT_ERROR(Parse(c), "config.json: tie_word_embeddings is false (unsupported)");
}

TEST(ConfigInvalidTest, UnknownArchitecture) {
  json c = Config31b();
  c["architectures"] = {"Gemma3ForCausalLM"};
  EXPECT_ERROR(Parse(c), "config.json: architectures is \"Gemma3ForCausalLM\" (unsupported)");
}

TEST(ConfigInvalidTest, ArchitecturesEmpty) {
  json c = Config31b();
  c["architectures"] = json::array();
  EXPECT_ERROR(Parse(c), "config.json: architectures must be a non-empty list");
}

TEST(ConfigInvalidTest, TextOnlyArchitectureWithTextConfig) {
  json c = Config31b();
  c["architectures"] = {"Gemma4ForCausalLM"};
  EXPECT_ERROR(Parse(c), "config.json: text_config is present but architectures is");
}

TEST(ConfigInvalidTest, IntegerFieldAsString) {
  json c = Config31b();
  c["text_config"]["hidden_size"] = "5376";
  EXPECT_ERROR(Parse(c), "text_config.hidden_size must be an integer");
}

TEST(ConfigInvalidTest, IntegerFieldAsBool) {
  json c = Config31b();
  c["text_config"]["num_hidden_layers"] = true;
  EXPECT_ERROR(Parse(c), "text_config.num_hidden_layers must be an integer");
}

TEST(ConfigInvalidTest, IntegerFieldAsFraction) {
  json c = Config31b();
  c["text_config"]["vocab_size"] = 262144.5;
  EXPECT_ERROR(Parse(c), "text_config.vocab_size must be an integer");
}

TEST(ConfigInvalidTest, IntegerFieldHuge) {
  json c = Config31b();
  c["text_config"]["intermediate_size"] = 99999999999999999999.0;
  EXPECT_ERROR(Parse(c), "text_config.intermediate_size must be an integer");
}

TEST(ConfigInvalidTest, SlidingWindowZero) {
  json c = Config31b();
  c["text_config"]["sliding_window"] = 0;
  EXPECT_ERROR(Parse(c), "text_config.sliding_window must be in [1,");
}

TEST(ConfigInvalidTest, RmsNormEpsNegative) {
  json c = Config31b();
  c["text_config"]["rms_norm_eps"] = -1e-6;
  EXPECT_ERROR(Parse(c), "text_config.rms_norm_eps must be in (0, 1)");
}

TEST(ConfigInvalidTest, SoftcapNegative) {
  json c = Config31b();
  c["text_config"]["final_logit_softcapping"] = -30.0;
  EXPECT_ERROR(Parse(c), "text_config.final_logit_softcapping must be >= 0");
}

TEST(ConfigInvalidTest, SoftcapNullMeansNone) {
  json c = Config31b();
  c["text_config"]["final_logit_softcapping"] = nullptr;
  auto config = ParseModelConfig(c.dump(), "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->final_logit_softcap, 0.0f);
}

TEST(ConfigInvalidTest, KEqVNotBool) {
  json c = Config31b();
  c["text_config"]["attention_k_eq_v"] = 1;
  EXPECT_ERROR(Parse(c), "text_config.attention_k_eq_v must be true or false");
}

TEST(ConfigInvalidTest, PadTokenOutOfVocab) {
  json c = Config31b();
  c["text_config"]["pad_token_id"] = 262144;
  EXPECT_ERROR(Parse(c), "text_config.pad_token_id must be in [0, 262143]");
}

TEST(ConfigInvalidTest, EosOutOfVocab) {
  json c = Config31b();
  c["eos_token_id"] = {1, 300000};
  EXPECT_ERROR(Parse(c), "config.json: eos_token_id must be token ids in [0, 262144)");
}

TEST(ConfigInvalidTest, EosNotAnInteger) {
  json c = ConfigFortunes();
  c["eos_token_id"] = "</s>";
  EXPECT_ERROR(Parse(c), "config.json: eos_token_id must be token ids");
}

TEST(ConfigInvalidTest, InvalidJson) {
  EXPECT_ERROR(ParseText("{\"architectures\": [\"Gemma4ForCausalLM\"],"),
               "config.json: invalid JSON");
}

TEST(ConfigInvalidTest, EmptyText) { EXPECT_ERROR(ParseText(""), "config.json: invalid JSON"); }

TEST(ConfigInvalidTest, NotAnObject) {
  EXPECT_ERROR(ParseText("[1, 2]"), "config.json: must be a JSON object");
}

TEST(ConfigInvalidTest, DuplicateKey) {
  std::string text = ConfigFortunes().dump();
  text.insert(1, "\"hidden_size\": 1, ");
  EXPECT_ERROR(ParseText(text), "config.json: duplicate JSON key \"hidden_size\"");
}

TEST(ConfigInvalidTest, TextConfigNotAnObject) {
  json c = Config31b();
  c["text_config"] = "none";
  EXPECT_ERROR(Parse(c), "config.json: text_config must be an object");
}

}  // namespace
}  // namespace gemma
