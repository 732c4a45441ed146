#include "engine/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gemma {
namespace {

const std::string kFortunesDir = std::string(GEMMA_MODELS_DIR) + "/gemma4-fortunes";
const std::string kTinyDir = std::string(GEMMA_TEST_DATA) + "/gemma4-tiny-random";

std::unique_ptr<Tokenizer> LoadOrDie(const std::string& dir) {
  auto tokenizer = Tokenizer::Load(dir + "/tokenizer.model");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

nlohmann::json ReadGolden(const std::string& dir) {
  std::ifstream in(dir + "/golden.json");
  return nlohmann::json::parse(in);
}

// Ids of pieces looked up one by one, independently of the code under test's
// rendering logic.
std::vector<int32_t> IdsOfPieces(const Tokenizer& tokenizer,
                                 std::initializer_list<std::string_view> pieces) {
  std::vector<int32_t> ids;
  for (std::string_view piece : pieces) {
    const int32_t id = tokenizer.PieceToId(piece);
    EXPECT_GE(id, 0) << "missing piece " << piece;
    ids.push_back(id);
  }
  return ids;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, EncodePromptMatchesGoldenIds) {
  auto tokenizer = LoadOrDie(GetParam());
  ASSERT_NE(tokenizer, nullptr);
  int num_checked = 0;
  const nlohmann::json golden = ReadGolden(GetParam());
  for (const auto& prompt : golden["prompts"]) {
    if (!prompt["text"].is_string()) continue;
    auto ids = tokenizer->EncodePrompt(prompt["text"].get<std::string>());
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, prompt["ids"].get<std::vector<int32_t>>()) << prompt["text"];
    ++num_checked;
  }
  EXPECT_GT(num_checked, 0);
}

TEST_P(GoldenTest, DecodeGreedyMatchesGoldenText) {
  auto tokenizer = LoadOrDie(GetParam());
  ASSERT_NE(tokenizer, nullptr);
  const nlohmann::json golden = ReadGolden(GetParam());
  for (const auto& prompt : golden["prompts"]) {
    const auto greedy = prompt["greedy"].get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer->Decode(greedy), prompt["greedy_text"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTest, ::testing::Values(kFortunesDir, kTinyDir));

TEST(TokenizerTest, SpecialTokensFoundByPiece) {
  auto tokenizer = LoadOrDie(kFortunesDir);
  ASSERT_NE(tokenizer, nullptr);
  const SpecialTokens& special = tokenizer->special();
  EXPECT_EQ(tokenizer->IdToPiece(special.pad), "<pad>");
  EXPECT_EQ(tokenizer->IdToPiece(special.eos), "<eos>");
  EXPECT_EQ(tokenizer->IdToPiece(special.bos), "<bos>");
  EXPECT_EQ(tokenizer->IdToPiece(special.unk), "<unk>");
  EXPECT_EQ(tokenizer->IdToPiece(special.turn_start), "<|turn>");
  EXPECT_EQ(tokenizer->IdToPiece(special.turn_end), "<turn|>");
  EXPECT_EQ(tokenizer->PieceToId("<no such piece>"), -1);
  EXPECT_EQ(tokenizer->vocab_size(), 1024);
}

TEST(TokenizerTest, LoadFailsNamingThePath) {
  const std::string missing = "/nonexistent/dir/tokenizer.model";
  auto result = Tokenizer::Load(missing);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find(missing), std::string::npos);

  // Any file that is not a model proto: the golden JSON will do.
  const std::string corrupt = kFortunesDir + "/golden.json";
  result = Tokenizer::Load(corrupt);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find(corrupt), std::string::npos);
}

TEST(TokenizerTest, EncodeRejectsInvalidUtf8WithOffset) {
  auto tokenizer = LoadOrDie(kFortunesDir);
  ASSERT_NE(tokenizer, nullptr);
  auto ids = tokenizer->Encode("abc\xFFxyz");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ids.status().message(), "prompt is not valid UTF-8 at byte 3");
  // A character cut off by the end, an overlong form, a surrogate.
  EXPECT_EQ(tokenizer->EncodePrompt("ok\xE6\x97").status().message(),
            "prompt is not valid UTF-8 at byte 2");
  EXPECT_FALSE(tokenizer->Encode("\xC0\xAF").ok());
  EXPECT_FALSE(tokenizer->Encode("\xED\xA0\x80").ok());
  EXPECT_TRUE(tokenizer->Encode("héllo — 日本 🙂").ok());
}

TEST(TokenizerTest, TurnMarkerInTextIsMatchedAsOnePiece) {
  // Documents SentencePiece's behaviour that RenderChat relies on: user-defined
  // pieces are matched whole, and the dummy prefix "▁" comes before them.
  auto tokenizer = LoadOrDie(kFortunesDir);
  ASSERT_NE(tokenizer, nullptr);
  auto ids = tokenizer->Encode("<|turn>user");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, IdsOfPieces(*tokenizer, {"\xE2\x96\x81", "<|turn>", "us", "er"}));
}

TEST(TokenizerTest, RenderChatIsTokenExact) {
  auto tokenizer = LoadOrDie(kFortunesDir);
  ASSERT_NE(tokenizer, nullptr);
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hello"},
                                             {"assistant", "Hi there"}};
  auto ids = tokenizer->RenderChat(messages);
  ASSERT_TRUE(ids.ok()) << ids.status();
  // Text after a marker gets no dummy-prefix "▁" ("s" "ystem", not "▁s"...).
  const std::vector<int32_t> expected = IdsOfPieces(
      *tokenizer,
      {"<bos>",
       "<|turn>", "s", "ystem", "\n", "B", "e", "\xE2\x96\x81" "b", "ri", "e", "f", ".", "<turn|>", "\n",
       "<|turn>", "us", "er", "\n", "H", "ell", "o", "<turn|>", "\n",
       "<|turn>", "m", "od", "el", "\n", "H", "i", "\xE2\x96\x81" "there", "<turn|>", "\n",
       "<|turn>", "m", "od", "el", "\n"});
  EXPECT_EQ(*ids, expected);
  EXPECT_EQ(tokenizer->Decode(*ids), "system\nBe brief.\nuser\nHello\nmodel\nHi there\nmodel\n");
}

TEST(TokenizerTest, RenderChatEmptyConversationIsGenerationPrompt) {
  auto tokenizer = LoadOrDie(kFortunesDir);
  ASSERT_NE(tokenizer, nullptr);
  auto ids = tokenizer->RenderChat({});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, IdsOfPieces(*tokenizer, {"<bos>", "<|turn>", "m", "od", "el", "\n"}));
}

TEST(TokenizerTest, RenderChatRejectsUnknownRole) {
  auto tokenizer = LoadOrDie(kFortunesDir);
  ASSERT_NE(tokenizer, nullptr);
  const std::vector<ChatMessage> messages = {{"user", "hi"}, {"wizard", "boo"}};
  auto ids = tokenizer->RenderChat(messages);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ids.status().message().find("wizard"), std::string::npos);
}

TEST(TokenizerTest, TokenBytesAndIsControl) {
  auto tokenizer = LoadOrDie(kFortunesDir);
  ASSERT_NE(tokenizer, nullptr);
  const SpecialTokens& special = tokenizer->special();
  for (int32_t id : {special.bos, special.eos, special.pad, special.turn_start, special.turn_end}) {
    EXPECT_TRUE(tokenizer->IsControl(id)) << tokenizer->IdToPiece(id);
    EXPECT_EQ(tokenizer->TokenBytes(id), "") << tokenizer->IdToPiece(id);
  }
  EXPECT_EQ(tokenizer->TokenBytes(tokenizer->PieceToId("<0xE2>")), "\xE2");
  EXPECT_EQ(tokenizer->TokenBytes(tokenizer->PieceToId("<0x00>")), std::string(1, '\0'));
  EXPECT_EQ(tokenizer->TokenBytes(tokenizer->PieceToId("\xE2\x96\x81the")), " the");
  EXPECT_EQ(tokenizer->TokenBytes(tokenizer->PieceToId("\xE2\x96\x81\xE2\x96\x81")), "  ");
  // User-defined pieces that are text stay text.
  const int32_t newline = tokenizer->PieceToId("\n");
  EXPECT_FALSE(tokenizer->IsControl(newline));
  EXPECT_EQ(tokenizer->TokenBytes(newline), "\n");
  EXPECT_EQ(tokenizer->TokenBytes(-1), "");
  EXPECT_EQ(tokenizer->TokenBytes(tokenizer->vocab_size()), "");
}

}  // namespace
}  // namespace gemma
