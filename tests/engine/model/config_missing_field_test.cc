// One test per required config.json field: removing it is an error that
// names the field by its full path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/model/config.h"
#include "tests/engine/model/test_util.h"

namespace gemma {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct MissingCase {
  std::string fixture;  // "31b" (multimodal, explicit), "fortunes" (flat), "tiny" (per-layer)
  std::string pointer;  // JSON pointer of the field to delete
  std::string message;  // expected error substring
};

std::string CaseName(const ::testing::TestParamInfo<MissingCase>& info) {
  std::string name = info.param.fixture + info.param.pointer;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class MissingFieldTest : public ::testing::TestWithParam<MissingCase> {};

TEST_P(MissingFieldTest, ErrorNamesField) {
  const MissingCase& c = GetParam();
  const std::string dir = c.fixture == "31b"        ? test::Real31bDir()
                          : c.fixture == "fortunes" ? test::FortunesDir()
                                                    : test::TinyRandomDir();
  json config = test::ReadJson(dir + "/config.json");
  const json::json_pointer ptr(c.pointer);
  ASSERT_TRUE(config.contains(ptr)) << c.pointer;
  config[ptr.parent_pointer()].erase(ptr.back());
  auto result = ParseModelConfig(config.dump(), "config.json");
  ASSERT_FALSE(result.ok()) << "parsed without " << c.pointer;
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(c.message));
}

MissingCase Text31b(const std::string& field) {
  std::string path = field;
  for (char& ch : path) {
    if (ch == '/') ch = '.';
  }
  return {"31b", "/text_config/" + field, "config.json: text_config." + path + " is missing"};
}

MissingCase Flat(const std::string& field) {
  return {"fortunes", "/" + field, "config.json: " + field + " is missing"};
}

INSTANTIATE_TEST_SUITE_P(
    Multimodal31b, MissingFieldTest,
    ::testing::Values(
        Text31b("vocab_size"), Text31b("hidden_size"), Text31b("intermediate_size"),
        Text31b("num_hidden_layers"), Text31b("num_attention_heads"),
        Text31b("num_key_value_heads"), Text31b("head_dim"), Text31b("global_head_dim"),
        Text31b("num_global_key_value_heads"), Text31b("sliding_window"),
        Text31b("max_position_embeddings"), Text31b("rms_norm_eps"),
        Text31b("final_logit_softcapping"), Text31b("hidden_activation"), Text31b("layer_types"),
        Text31b("attention_k_eq_v"), Text31b("rope_parameters"),
        Text31b("rope_parameters/sliding_attention"), Text31b("rope_parameters/full_attention"),
        Text31b("rope_parameters/sliding_attention/rope_type"),
        Text31b("rope_parameters/sliding_attention/rope_theta"),
        Text31b("rope_parameters/full_attention/rope_theta"),
        Text31b("rope_parameters/full_attention/partial_rotary_factor"),
        Text31b("hidden_size_per_layer_input"), Text31b("enable_moe_block"),
        Text31b("num_kv_shared_layers"), Text31b("pad_token_id"), Text31b("bos_token_id"),
        MissingCase{"31b", "/text_config", "config.json: text_config is missing"},
        MissingCase{"31b", "/architectures", "config.json: architectures is missing"}),
    CaseName);

INSTANTIATE_TEST_SUITE_P(TextOnlyFortunes, MissingFieldTest,
                         ::testing::Values(Flat("hidden_size"), Flat("eos_token_id"),
                                           Flat("tie_word_embeddings"), Flat("global_head_dim"),
                                           Flat("num_global_key_value_heads"),
                                           Flat("pad_token_id")),
                         CaseName);

INSTANTIATE_TEST_SUITE_P(
    PerLayerTiny, MissingFieldTest,
    ::testing::Values(MissingCase{"tiny", "/text_config/per_layer_config",
                                  "config.json: text_config.global_head_dim is missing"},
                      MissingCase{
                          "tiny", "/text_config/per_layer_config/11",
                          "text_config.global_head_dim is missing (and per_layer_config has no "
                          "entry for global layer 11)"},
                      MissingCase{"tiny", "/text_config/per_layer_config/05/num_key_value_heads",
                                  "text_config.num_global_key_value_heads is missing"},
                      MissingCase{"tiny", "/text_config/hidden_size",
                                  "config.json: text_config.hidden_size is missing"}),
    CaseName);

}  // namespace
}  // namespace gemma
