// TokenizerModel over a Hugging Face `tokenizer.json` (BPE), with the
// semantics of `tokenizers` for encode(add_special_tokens=False) and
// decode(skip_special_tokens): added tokens are found in the raw text first
// (leftmost, then longest), the rest is normalized, then normalized added
// tokens are found, then it is pre-tokenized and each word goes through BPE.
// `tokenizer_config.json` beside the file, when present, names the special
// tokens and holds the chat template.
//
// Thread-safety: immutable after loading; const methods are safe to call
// concurrently.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/tokenizer/added_vocabulary.h"
#include "engine/tokenizer/bpe_decoder.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/tokenizer_config.h"
#include "engine/tokenizer/tokenizer_json.h"
#include "engine/tokenizer/string_hash.h"
#include "engine/tokenizer/tokenizer_model.h"

namespace gemma {

class BpeTokenizerModel : public TokenizerModel {
 public:
  // Reads `json_path` and, when it exists, tokenizer_config.json in the same
  // directory. Errors name the file and the JSON path.
  static absl::StatusOr<std::unique_ptr<BpeTokenizerModel>> Load(const std::string& json_path);
  // The same from texts; `config_text` is nullopt when there is no config.
  // The names are used in error messages.
  static absl::StatusOr<std::unique_ptr<BpeTokenizerModel>> Create(
      std::string_view json_text, std::string_view json_name,
      std::optional<std::string_view> config_text, std::string_view config_name);

  int num_pieces() const override { return num_ids_; }
  int32_t PieceToId(std::string_view piece) const override;
  std::string IdToPiece(int32_t id) const override;
  SpecialTokens FindSpecialTokens() const override;
  const std::string& chat_template() const override { return config_.chat_template; }

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const override;
  // No dummy prefix exists in HF BPE, so this is Encode.
  absl::StatusOr<std::vector<int32_t>> EncodeSegment(std::string_view text) const override {
    return Encode(text);
  }
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  size_t max_bytes_per_token() const override { return max_bytes_per_token_; }

  std::string TokenBytes(int32_t id) const override;
  std::string TokenText(int32_t id) const override;
  bool IsControl(int32_t id) const override { return IsSpecial(id); }
  bool IsSpecial(int32_t id) const override;
  // A "<0xXX>" piece that the decoder's ByteFallback turns into its byte.
  bool IsByteToken(int32_t id) const override;
  bool StripsFirstSpace(int32_t id) const override;

 private:
  BpeTokenizerModel() = default;
  absl::Status InitAddedTokens(std::vector<AddedToken> tokens, std::string_view json_name);
  std::string Normalize(std::string_view text) const;
  void EncodeNormalized(std::string_view text, std::vector<int32_t>& ids) const;
  void PreTokenizeAndEncode(std::string_view text, std::vector<int32_t>& ids) const;
  int32_t FindToken(const std::optional<std::string>& configured, std::string_view fallback) const;

  std::unique_ptr<BpeModel> bpe_;
  std::vector<ReplaceRule> normalizer_;
  std::optional<SplitRule> pre_tokenizer_;
  BpeDecoder decoder_;
  TokenizerConfig config_;
  AddedTokenMatcher raw_matcher_;         // tokens with normalized == false
  AddedTokenMatcher normalized_matcher_;  // tokens with normalized == true
  absl::flat_hash_map<std::string, int32_t, StringViewHash, StringViewEq> added_ids_;   // by content
  absl::flat_hash_map<int32_t, std::string> added_pieces_;  // by id
  std::vector<bool> special_;  // by id: an added token with special == true
  int num_ids_ = 0;
  size_t max_bytes_per_token_ = 0;
};

}  // namespace gemma
