// Loading tokenizer.json / tokenizer_config.json: errors name the file and the
// JSON path; model directories prefer tokenizer.json; special tokens and the
// chat template come from the config.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/bpe_tokenizer_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tokenizer_test_data.h"

namespace gemma {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kFortunesJson = testing_data::kTokenizerData + "/gemma4-fortunes.tokenizer.json";
const std::string kFortunesModel =
    std::string(GEMMA_MODELS_DIR) + "/gemma4-fortunes/tokenizer.model";

std::string CreateError(const std::string& json_text,
                        std::optional<std::string> config_text = std::nullopt) {
  auto model = BpeTokenizerModel::Create(json_text, "tokenizer.json", config_text,
                                         "tokenizer_config.json");
  return model.ok() ? "OK" : std::string(model.status().message());
}

nlohmann::json FortunesJson() { return nlohmann::json::parse(testing_data::ReadText(kFortunesJson)); }

TEST(BpeLoadTest, TruncatedFileNamesFileAndPath) {
  const std::string text = testing_data::ReadText(kFortunesJson);
  const std::string error = CreateError(text.substr(0, text.size() * 3 / 4));
  EXPECT_THAT(error, StartsWith("tokenizer.json: /model/merges/"));
  EXPECT_THAT(error, HasSubstr("truncated"));
}

TEST(BpeLoadTest, MalformedMergeNamesItsIndex) {
  nlohmann::json json = FortunesJson();
  json["model"]["merges"][17] = 5;
  EXPECT_EQ(CreateError(json.dump()),
            "tokenizer.json: /model/merges/17: expected a string or a pair of strings");
  json["model"]["merges"][17] = {"a", "b", "c"};
  EXPECT_EQ(CreateError(json.dump()),
            "tokenizer.json: /model/merges/17: expected a string or a pair of strings");
  json["model"]["merges"][17] = "a b";
  EXPECT_THAT(CreateError(json.dump()), HasSubstr("/model/merges/17: merges mix"));
}

TEST(BpeLoadTest, WrongTypesNameTheirPath) {
  nlohmann::json json = FortunesJson();
  json["added_tokens"][3]["special"] = "yes";
  EXPECT_EQ(CreateError(json.dump()), "tokenizer.json: /added_tokens/3/special: expected true or false");
  json = FortunesJson();
  json["model"]["vocab"]["<eos>"] = "one";
  EXPECT_EQ(CreateError(json.dump()), "tokenizer.json: /model/vocab/<eos>: expected a non-negative integer id");
  json = FortunesJson();
  json["model"]["vocab"] = nlohmann::json::array();
  EXPECT_EQ(CreateError(json.dump()), "tokenizer.json: /model/vocab: expected an object");
  json = FortunesJson();
  json["model"]["merges"][3] = {"\xE2\x96\x81", "nothere"};
  EXPECT_THAT(CreateError(json.dump()), HasSubstr("/model/merges/3: piece \"nothere\" is not in"));
  EXPECT_EQ(CreateError("[1, 2]"), "tokenizer.json: /: expected an object");
}

TEST(BpeLoadTest, UnsupportedPartsAreRefusedByName) {
  nlohmann::json json = FortunesJson();
  json["model"]["type"] = "WordPiece";
  EXPECT_EQ(CreateError(json.dump()), "tokenizer.json: /model/type: unsupported model type \"WordPiece\"");
  json = FortunesJson();
  json["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}};
  EXPECT_EQ(CreateError(json.dump()),
            "tokenizer.json: /pre_tokenizer/type: unsupported pre-tokenizer \"Metaspace\"");
  json["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"}};
  EXPECT_THAT(CreateError(json.dump()), StartsWith("tokenizer.json: /pre_tokenizer/pattern/Regex: unsupported"));
  json = FortunesJson();
  json["normalizer"]["normalizers"][0] = {{"type", "NFKC"}};
  EXPECT_EQ(CreateError(json.dump()),
            "tokenizer.json: /normalizer/normalizers/0/type: unsupported normalizer \"NFKC\"");
  json = FortunesJson();
  json["decoder"]["decoders"][1] = {{"type", "ByteLevel"}};
  EXPECT_EQ(CreateError(json.dump()), "tokenizer.json: /decoder/decoders/1/type: unsupported decoder \"ByteLevel\"");
  json = FortunesJson();
  json["added_tokens"][5]["single_word"] = true;
  EXPECT_EQ(CreateError(json.dump()), "tokenizer.json: /added_tokens/5/single_word: unsupported: must be false");
}

TEST(BpeLoadTest, ConfigErrorsNameFileAndPath) {
  const std::string json = testing_data::ReadText(kFortunesJson);
  EXPECT_EQ(CreateError(json, R"({"bos_token": 5})"),
            "tokenizer_config.json: /bos_token: expected a string or {\"content\": ...}");
  EXPECT_EQ(CreateError(json, R"({"eos_token": {"content": 7}})"),
            "tokenizer_config.json: /eos_token/content: expected a string");
  EXPECT_EQ(CreateError(json, R"({"chat_template": 3})"),
            "tokenizer_config.json: /chat_template: expected a string or an array");
  EXPECT_THAT(CreateError(json, R"({"chat_template": )"), StartsWith("tokenizer_config.json: /: invalid JSON"));
}

TEST(BpeLoadTest, ConfigNamesSpecialTokensAndChatTemplate) {
  auto model = BpeTokenizerModel::Create(
      testing_data::ReadText(kFortunesJson), "tokenizer.json",
      R"({"bos_token": {"content": "<bos>"}, "eos_token": "<turn|>", "chat_template": "{{ x }}"})",
      "tokenizer_config.json");
  ASSERT_TRUE(model.ok()) << model.status();
  const SpecialTokens special = (*model)->FindSpecialTokens();
  EXPECT_EQ(special.bos, (*model)->PieceToId("<bos>"));
  EXPECT_EQ(special.eos, (*model)->PieceToId("<turn|>"));
  EXPECT_EQ(special.pad, (*model)->PieceToId("<pad>"));
  EXPECT_EQ((*model)->chat_template(), "{{ x }}");
}

class TokenizerDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gemma_tokenizer_dir_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Put(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST_F(TokenizerDirTest, PrefersTokenizerJsonAndReadsConfig) {
  fs::copy_file(kFortunesModel, dir_ / "tokenizer.model");
  fs::copy_file(kFortunesJson, dir_ / "tokenizer.json");
  Put("tokenizer_config.json", R"({"chat_template": "T"})");
  auto tokenizer = Tokenizer::Load(dir_.string());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->chat_template(), "T");
}

TEST_F(TokenizerDirTest, TokenizerModelAloneStillWorks) {
  fs::copy_file(kFortunesModel, dir_ / "tokenizer.model");
  auto tokenizer = Tokenizer::Load(dir_.string());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->chat_template(), "");
  auto ids = (*tokenizer)->EncodePrompt("The quick brown fox");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{2, 407, 610, 600, 691, 596, 293, 916, 956}));
}

TEST_F(TokenizerDirTest, NeitherFileIsNotFoundNamingBoth) {
  auto tokenizer = Tokenizer::Load(dir_.string());
  ASSERT_EQ(tokenizer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(tokenizer.status().message(), HasSubstr("tokenizer.json"));
  EXPECT_THAT(tokenizer.status().message(), HasSubstr("tokenizer.model"));
}

TEST_F(TokenizerDirTest, JsonErrorsNameTheFile) {
  Put("tokenizer.json", R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})");
  auto tokenizer = Tokenizer::Load(dir_.string());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_THAT(tokenizer.status().message(),
              HasSubstr("tokenizer.json: /model/type: unsupported model type \"Unigram\""));
  Put("tokenizer.json", testing_data::ReadText(kFortunesJson));
  Put("tokenizer_config.json", R"({"pad_token": []})");
  tokenizer = Tokenizer::Load((dir_ / "tokenizer.json").string());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_THAT(tokenizer.status().message(), HasSubstr("tokenizer_config.json: /pad_token: expected"));
}

}  // namespace
}  // namespace gemma
