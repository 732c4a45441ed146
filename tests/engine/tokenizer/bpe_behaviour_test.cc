// Behaviour of the tokenizer.json backend through gemma::Tokenizer: special
// tokens, decoding with and without them, chat rendering, and how the
// fixtures' converted tokenizer.json compares with their tokenizer.model.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/bpe_tokenizer_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tokenizer_test_data.h"

namespace gemma {
namespace {

const std::string kFortunesDir = std::string(GEMMA_MODELS_DIR) + "/gemma4-fortunes";

std::unique_ptr<Tokenizer> LoadOrDie(const std::string& path) {
  auto tokenizer = Tokenizer::Load(path);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

bool HasControlPiece(std::string_view text) {
  for (std::string_view piece : {"<bos>", "<eos>", "<pad>", "<unk>"}) {
    if (text.find(piece) != std::string_view::npos) return true;
  }
  return false;
}

class FortunesBackendsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hf_ = LoadOrDie(std::string(GEMMA_TEST_DATA) + "/tokenizers/gemma4-fortunes.tokenizer.json");
    sp_ = LoadOrDie(kFortunesDir + "/tokenizer.model");
    ASSERT_NE(hf_, nullptr);
    ASSERT_NE(sp_, nullptr);
  }
  std::unique_ptr<Tokenizer> hf_, sp_;
};

TEST_F(FortunesBackendsTest, SameVocabularyAndSpecialTokens) {
  ASSERT_EQ(hf_->vocab_size(), sp_->vocab_size());
  for (int32_t id = 0; id < hf_->vocab_size(); ++id) {
    EXPECT_EQ(hf_->IdToPiece(id), sp_->IdToPiece(id)) << id;
  }
  EXPECT_EQ(hf_->special().bos, sp_->special().bos);
  EXPECT_EQ(hf_->special().eos, sp_->special().eos);
  EXPECT_EQ(hf_->special().pad, sp_->special().pad);
  EXPECT_EQ(hf_->special().turn_start, sp_->special().turn_start);
  EXPECT_EQ(hf_->special().turn_end, sp_->special().turn_end);
}

// The converted tokenizer.json differs from tokenizer.model in two ways, both
// as in `tokenizers`/transformers: (1) no dummy-prefix "▁" at the start of the
// text; (2) the user-defined pieces "  " and "    " are added tokens matched
// in the raw text, while SentencePiece never matches them (it turns spaces into
// "▁" first); (3) "<unk>" written in the text is matched as that token
// (added tokens, special or not, are found in the raw text), while the
// SentencePiece backend matches only its control pieces ("<bos>", "<eos>",
// "<pad>") there, as a chat template's "<bos>" needs. Away from those, the
// encodings agree: for text with no double space and no control piece that
// does not start with a space, SentencePiece(text) equals
// tokenizer.json(" " + text).
TEST_F(FortunesBackendsTest, EncodingsAgreeUpToDummyPrefixAndSpaceRunTokens) {
  const nlohmann::json corpus = nlohmann::json::parse(
      testing_data::ReadText(testing_data::kTokenizerData + "/corpus.json"));
  int num_compared = 0, num_differ = 0;
  for (const auto& item : corpus) {
    const std::string text = item.get<std::string>();
    if (text.empty() || text.starts_with(" ") || text.find("  ") != std::string::npos ||
        HasControlPiece(text)) {
      continue;
    }
    ++num_compared;
    auto hf = hf_->Encode(" " + text);
    auto sp = sp_->Encode(text);
    ASSERT_TRUE(hf.ok() && sp.ok());
    if (*hf != *sp && ++num_differ <= 5) {
      ADD_FAILURE() << nlohmann::json(text).dump() << "\n hf " << nlohmann::json(*hf).dump()
                    << "\n sp " << nlohmann::json(*sp).dump();
    }
  }
  EXPECT_GT(num_compared, 900);
  EXPECT_EQ(num_differ, 0);
  // The two differences themselves.
  EXPECT_NE(*hf_->Encode("The quick brown fox"), *sp_->Encode("The quick brown fox"));
  EXPECT_EQ(*hf_->Encode("a    b"),
            (std::vector<int32_t>{hf_->PieceToId("a"), hf_->PieceToId("    "), hf_->PieceToId("b")}));
  EXPECT_EQ(*hf_->Encode("<bos>"), std::vector<int32_t>{hf_->special().bos});
  EXPECT_EQ(*sp_->Encode("<bos>"), std::vector<int32_t>{sp_->special().bos});
  EXPECT_EQ(*hf_->Encode("<unk>"), std::vector<int32_t>{hf_->special().unk});
  EXPECT_NE(*sp_->Encode("<unk>"), std::vector<int32_t>{sp_->special().unk});
}

TEST_F(FortunesBackendsTest, ChatRenderingUsesTheSameMarkers) {
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi there"}};
  auto hf = hf_->RenderChat(messages);
  auto sp = sp_->RenderChat(messages);
  ASSERT_TRUE(hf.ok()) << hf.status();
  ASSERT_TRUE(sp.ok()) << sp.status();
  // No dummy prefix is involved after a special token, so both agree.
  EXPECT_EQ(*hf, *sp);
  EXPECT_EQ(hf_->Decode(*hf, /*skip_special_tokens=*/false),
            "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nHi there<turn|>\n<|turn>model\n");
}

TEST_F(FortunesBackendsTest, SpecialTokensAreThoseMarkedSpecial) {
  const SpecialTokens& special = hf_->special();
  for (int32_t id : {special.bos, special.eos, special.pad, special.unk}) {
    EXPECT_TRUE(hf_->IsSpecial(id)) << id;
    EXPECT_TRUE(hf_->IsControl(id)) << id;
    EXPECT_EQ(hf_->TokenBytes(id), "");
    EXPECT_EQ(hf_->TokenText(id), hf_->IdToPiece(id));
  }
  // The converted file marks the chat markers special: false, so
  // skip_special_tokens keeps them, as `tokenizers` does.
  EXPECT_FALSE(hf_->IsSpecial(special.turn_start));
  EXPECT_EQ(hf_->TokenText(special.turn_start), "<|turn>");
  const std::vector<int32_t> ids = {special.bos, special.turn_start, hf_->PieceToId("\xE2\x96\x81the"),
                                    hf_->PieceToId("<0xE2>"), hf_->PieceToId("<0x82>"),
                                    hf_->PieceToId("<0xAC>"), special.eos};
  EXPECT_EQ(hf_->Decode(ids, /*skip_special_tokens=*/true), "<|turn> the\xE2\x82\xAC");
  EXPECT_EQ(hf_->Decode(ids, /*skip_special_tokens=*/false), "<bos><|turn> the\xE2\x82\xAC<eos>");
  EXPECT_TRUE(hf_->IsByteToken(hf_->PieceToId("<0xE2>")));
  EXPECT_EQ(hf_->TokenBytes(hf_->PieceToId("<0xE2>")), "\xE2");
  EXPECT_FALSE(hf_->StripsFirstSpace(hf_->PieceToId("\xE2\x96\x81the")));
}

// `tokenizers`' ByteFallback: a run of byte pieces that is not valid UTF-8
// becomes one U+FFFD per byte, even where a prefix of it is valid.
TEST_F(FortunesBackendsTest, InvalidByteRunGivesOneReplacementPerByte) {
  const std::vector<int32_t> ids = {hf_->PieceToId("<0x41>"), hf_->PieceToId("<0xE2>"),
                                    hf_->PieceToId("a")};
  EXPECT_EQ(hf_->Decode(ids, false), "\xEF\xBF\xBD\xEF\xBF\xBD" "a");
}

}  // namespace
}  // namespace gemma
