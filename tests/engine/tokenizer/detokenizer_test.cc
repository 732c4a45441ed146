#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/sentencepiece_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace gemma {
namespace {

const std::string kModelPath = std::string(GEMMA_MODELS_DIR) + "/gemma4-fortunes/tokenizer.model";

class DetokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = Tokenizer::Load(kModelPath);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = std::move(*loaded);
  }

  // Streams `ids`, checking that every delta is valid UTF-8; returns the text.
  std::string Stream(const std::vector<int32_t>& ids) {
    IncrementalDetokenizer detokenizer(tokenizer_.get());
    std::string text;
    for (int32_t id : ids) {
      const std::string delta = detokenizer.Push(id);
      EXPECT_EQ(utf8::FirstInvalidByte(delta), std::string_view::npos) << "after id " << id;
      text += delta;
    }
    const std::string tail = detokenizer.Flush();
    EXPECT_EQ(utf8::FirstInvalidByte(tail), std::string_view::npos);
    return text + tail;
  }

  int32_t Byte(int value) {
    char piece[8];
    std::snprintf(piece, sizeof(piece), "<0x%02X>", value);
    return tokenizer_->PieceToId(piece);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(DetokenizerTest, MultiByteTextRoundTripsThroughByteFallback) {
  const std::string text = "héllo — 日本 🙂";
  auto ids = tokenizer_->Encode(text);
  ASSERT_TRUE(ids.ok());
  int num_byte_pieces = 0;
  for (int32_t id : *ids) num_byte_pieces += tokenizer_->IdToPiece(id).starts_with("<0x");
  EXPECT_GE(num_byte_pieces, 4) << "the test wants characters split across byte pieces";
  EXPECT_EQ(tokenizer_->Decode(*ids), text);
  EXPECT_EQ(Stream(*ids), text);
}

TEST_F(DetokenizerTest, HoldsPartialCharacterUntilComplete) {
  IncrementalDetokenizer detokenizer(tokenizer_.get());
  EXPECT_EQ(detokenizer.Push(Byte(0xE6)), "");
  EXPECT_EQ(detokenizer.Push(Byte(0x97)), "");
  EXPECT_EQ(detokenizer.Push(Byte(0xA5)), "日");
  EXPECT_EQ(detokenizer.Flush(), "");
}

TEST_F(DetokenizerTest, FlushReplacesLeftoverBytes) {
  IncrementalDetokenizer detokenizer(tokenizer_.get());
  EXPECT_EQ(detokenizer.Push(Byte(0xF0)), "");
  EXPECT_EQ(detokenizer.Push(Byte(0x9F)), "");
  EXPECT_EQ(detokenizer.Flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_F(DetokenizerTest, BrokenSequenceIsReplacedAsSoonAsItIsDecidable) {
  IncrementalDetokenizer detokenizer(tokenizer_.get());
  EXPECT_EQ(detokenizer.Push(Byte(0xE2)), "");
  EXPECT_EQ(detokenizer.Push(tokenizer_->PieceToId("x")), "\xEF\xBF\xBDx");
}

TEST_F(DetokenizerTest, OnlyFirstVisiblePieceLosesItsSpace) {
  const int32_t the = tokenizer_->PieceToId("\xE2\x96\x81the");
  const SpecialTokens& special = tokenizer_->special();
  EXPECT_EQ(tokenizer_->Decode(std::vector<int32_t>{special.bos, the, the}), "the the");
  EXPECT_EQ(Stream({special.bos, the, the}), "the the");
  EXPECT_EQ(tokenizer_->Decode(std::vector<int32_t>{Byte('a'), the}), "a the");
}

// Random id streams, heavy in byte pieces so characters break at every
// position: deltas stay valid, concatenate to Decode, and Decode agrees with
// SentencePiece's own decoder on the same ids less control tokens. (Two
// deliberate differences: SentencePiece prints markers like "<|turn>" as text,
// and it decodes the byte pieces on either side of a control token apart,
// while we, like Hugging Face's skip_special_tokens, join them.)
TEST_F(DetokenizerTest, RandomStreamsMatchDecodeAndSentencePiece) {
  std::string error;
  auto reference = SentencePieceModel::Load(kModelPath, &error);
  ASSERT_NE(reference, nullptr) << error;
  const SpecialTokens& special = tokenizer_->special();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any_id(0, tokenizer_->vocab_size() - 1);
  std::uniform_int_distribution<int> any_byte(0x80, 0xFF);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 24; ++i) {
      int32_t id = (rng() % 2 == 0) ? Byte(any_byte(rng)) : any_id(rng);
      const bool marker = tokenizer_->IsControl(id) && id != special.bos && id != special.eos &&
                          id != special.pad;
      if (!marker) ids.push_back(id);
    }
    const std::string decoded = tokenizer_->Decode(ids);
    EXPECT_EQ(Stream(ids), decoded);
    std::vector<int> visible;
    for (int32_t id : ids) {
      if (!tokenizer_->IsControl(id)) visible.push_back(id);
    }
    EXPECT_EQ(decoded, reference->ReferenceDecode(visible)) << "trial " << trial;
  }
}

// Runs of tokens that decode to nothing (skipped special tokens), up to well
// past the detokenizer's 64-token look-back, between words and byte pieces:
// the streamed text still equals the decode of the whole sequence.
TEST_F(DetokenizerTest, LongRunsOfSkippedTokensStreamAsTheirDecode) {
  const SpecialTokens& special = tokenizer_->special();
  const std::vector<int32_t> skipped = {special.bos, special.eos, special.pad};
  std::mt19937 rng(99);
  std::uniform_int_distribution<int32_t> any_id(0, tokenizer_->vocab_size() - 1);
  std::uniform_int_distribution<int> any_byte(0x80, 0xFF), run_length(0, 150);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<int32_t> ids;
    for (int piece = 0; piece < 6; ++piece) {
      for (int i = 0, n = run_length(rng); i < n; ++i) ids.push_back(skipped[rng() % skipped.size()]);
      for (int i = 0; i < 3; ++i) {
        const int32_t id = (rng() % 3 == 0) ? Byte(any_byte(rng)) : any_id(rng);
        if (!tokenizer_->IsControl(id)) ids.push_back(id);
      }
    }
    EXPECT_EQ(Stream(ids), tokenizer_->Decode(ids)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace gemma
