// tokenizer.json (BPE) against Hugging Face `tokenizers`: the ids and the
// decoded text of every corpus string equal the goldens, for the real Gemma 3
// tokenizer and for the fixtures' converted Gemma 4 one.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/bpe_tokenizer_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tokenizer_test_data.h"

namespace gemma {
namespace {

using testing_data::kTokenizerData;

struct GoldenCase {
  std::string name;          // golden_<name>.json
  std::string tokenizer;     // file under tests/data/tokenizers
};

std::unique_ptr<BpeTokenizerModel> LoadModel(const GoldenCase& golden) {
  const std::string path = kTokenizerData + "/" + golden.tokenizer;
  const std::string text = path.ends_with(".gz") ? testing_data::ReadGzip(path)
                                                 : testing_data::ReadText(path);
  EXPECT_FALSE(text.empty()) << path;
  auto model = BpeTokenizerModel::Create(text, golden.tokenizer, std::nullopt, "");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

class BpeGoldenTest : public ::testing::TestWithParam<GoldenCase> {
 protected:
  void SetUp() override {
    model_ = LoadModel(GetParam());
    ASSERT_NE(model_, nullptr);
    golden_ = nlohmann::json::parse(
        testing_data::ReadText(kTokenizerData + "/golden_" + GetParam().name + ".json"));
  }
  std::unique_ptr<BpeTokenizerModel> model_;
  nlohmann::json golden_;
};

TEST_P(BpeGoldenTest, IdsEqualTokenizersOnWholeCorpus) {
  const auto& texts = golden_["texts"];
  const auto& ids = golden_["ids"];
  ASSERT_EQ(texts.size(), 3245u);
  ASSERT_EQ(ids.size(), texts.size());
  int num_mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto encoded = model_->Encode(texts[i].get<std::string>());
    ASSERT_TRUE(encoded.ok()) << encoded.status();
    const auto expected = ids[i].get<std::vector<int32_t>>();
    if (*encoded != expected && ++num_mismatches <= 5) {
      ADD_FAILURE() << "text " << i << ": " << texts[i].dump() << "\n  got      "
                    << nlohmann::json(*encoded).dump() << "\n  expected "
                    << nlohmann::json(expected).dump();
    }
  }
  EXPECT_EQ(num_mismatches, 0);
}

TEST_P(BpeGoldenTest, DecodedEqualsTokenizersOnWholeCorpus) {
  const auto& ids = golden_["ids"];
  const auto& decoded = golden_["decoded"];
  int num_mismatches = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto token_ids = ids[i].get<std::vector<int32_t>>();
    const std::string text = model_->Decode(token_ids, /*skip_special_tokens=*/false);
    if (text != decoded[i].get<std::string>() && ++num_mismatches <= 5) {
      ADD_FAILURE() << "ids " << i << ": got " << nlohmann::json(text).dump() << " expected "
                    << decoded[i].dump();
    }
  }
  EXPECT_EQ(num_mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizers, BpeGoldenTest,
    ::testing::Values(GoldenCase{"gemma3", "gemma3.tokenizer.json.gz"},
                      GoldenCase{"gemma4-fortunes", "gemma4-fortunes.tokenizer.json"}),
    [](const auto& info) { return info.param.name == "gemma3" ? "Gemma3" : "Gemma4Fortunes"; });

}  // namespace
}  // namespace gemma
