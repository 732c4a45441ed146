// The interface between gemma::Tokenizer and its two backends: SentencePiece
// (`tokenizer.model`) and Hugging Face BPE (`tokenizer.json`). Private to
// engine/tokenizer; Tokenizer documents the contract of each method.
//
// Thread-safety: implementations are immutable after loading; const methods
// are safe to call concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gemma {

struct SpecialTokens {
  int32_t pad = -1, eos = -1, bos = -1, unk = -1;
  int32_t turn_start = -1;  // "<|turn>"
  int32_t turn_end = -1;    // "<turn|>"
};

class TokenizerModel {
 public:
  virtual ~TokenizerModel() = default;

  virtual int num_pieces() const = 0;
  virtual int32_t PieceToId(std::string_view piece) const = 0;  // -1 when absent
  virtual std::string IdToPiece(int32_t id) const = 0;          // "" when out of range
  // The special tokens, found by content.
  virtual SpecialTokens FindSpecialTokens() const = 0;
  // The chat template shipped with the tokenizer; empty when none.
  virtual const std::string& chat_template() const = 0;

  // REQUIRES: `text` is valid UTF-8.
  virtual absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const = 0;
  // Text that follows a special token (no dummy prefix). REQUIRES: valid UTF-8.
  virtual absl::StatusOr<std::vector<int32_t>> EncodeSegment(std::string_view text) const = 0;
  virtual std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const = 0;
  // Tokenizer::max_bytes_per_token.
  virtual size_t max_bytes_per_token() const = 0;

  virtual std::string TokenBytes(int32_t id) const = 0;
  virtual std::string TokenText(int32_t id) const = 0;
  virtual bool IsControl(int32_t id) const = 0;
  virtual bool IsSpecial(int32_t id) const = 0;
  virtual bool IsByteToken(int32_t id) const = 0;
  virtual bool StripsFirstSpace(int32_t id) const = 0;
};

}  // namespace gemma
