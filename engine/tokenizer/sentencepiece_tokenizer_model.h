// TokenizerModel over a SentencePiece `tokenizer.model`.
//
// Thread-safety: immutable after Load(); const methods are safe to call
// concurrently.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer_model.h"

namespace gemma {

class SentencePieceModel;

class SentencePieceTokenizerModel : public TokenizerModel {
 public:
  // INVALID_ARGUMENT naming the file when it is not a SentencePiece model.
  // REQUIRES: `path` is an existing file.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizerModel>> Load(const std::string& path);
  ~SentencePieceTokenizerModel() override;

  int num_pieces() const override;
  int32_t PieceToId(std::string_view piece) const override;
  std::string IdToPiece(int32_t id) const override;
  SpecialTokens FindSpecialTokens() const override;
  const std::string& chat_template() const override { return chat_template_; }

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const override;
  absl::StatusOr<std::vector<int32_t>> EncodeSegment(std::string_view text) const override;
  // Control pieces are dropped (skip_special_tokens) or written as their
  // piece; the first visible piece loses the dummy-prefix space.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  // The longest piece with the identity normalizer, byte fallback and
  // whitespace kept as written; else 0 (NFKC may shorten text, collapsed
  // whitespace and fused unknown characters have no bound).
  size_t max_bytes_per_token() const override { return max_bytes_per_token_; }

  std::string TokenBytes(int32_t id) const override;
  std::string TokenText(int32_t id) const override;
  bool IsControl(int32_t id) const override;
  bool IsSpecial(int32_t id) const override { return IsControl(id); }
  bool IsByteToken(int32_t id) const override;
  bool StripsFirstSpace(int32_t id) const override;

 private:
  SentencePieceTokenizerModel();
  // SentencePiece's own encoding of `text` (dummy prefix included).
  absl::StatusOr<std::vector<int32_t>> EncodeRaw(std::string_view text) const;

  std::unique_ptr<SentencePieceModel> sp_;
  std::vector<bool> control_;  // by id: IsControl()
  // SentencePiece control pieces (<bos>, <eos>, <pad>) and their ids: matched
  // in the text by Encode.
  std::vector<std::pair<std::string, int32_t>> control_pieces_;
  bool adds_dummy_prefix_ = false;
  size_t max_bytes_per_token_ = 0;
  std::string chat_template_;  // always empty: a .model file has none
};

}  // namespace gemma
