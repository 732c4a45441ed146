// The Gemma 4 tokenizer, over either backend: a Hugging Face `tokenizer.json`
// (BPE with byte fallback, as Google ships it; ids exactly those of
// `tokenizers`) or a SentencePiece `tokenizer.model`. Special tokens are looked
// up by content (never hard-coded ids: the fixtures' tokenizer has other ids
// than the real one). Also renders the Gemma 4 chat format.
//
// Thread-safety: const methods are safe to call concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer_model.h"

namespace gemma {

struct ChatMessage {
  std::string role;     // system | user | assistant | model
  std::string content;
};

class Tokenizer {
 public:
  // `model_path` is a model directory or a file. In a directory,
  // tokenizer.json is preferred to tokenizer.model when both exist (as
  // transformers does); NOT_FOUND naming both when neither does. A file ending
  // in ".json" is a Hugging Face tokenizer.json (tokenizer_config.json beside
  // it is read too); any other file is a SentencePiece model. Errors in JSON
  // files name the file and the JSON path.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& model_path);
  ~Tokenizer();

  // The chat template shipped beside tokenizer.json (tokenizer_config.json's
  // "chat_template"); empty when there is none.
  const std::string& chat_template() const;

  int vocab_size() const;
  const SpecialTokens& special() const { return special_; }
  // Id of a piece, or -1 when the vocabulary lacks it.
  int32_t PieceToId(std::string_view piece) const;
  std::string IdToPiece(int32_t id) const;

  // Plain encoding, no BOS. INVALID_ARGUMENT on invalid UTF-8.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const;
  // BOS + Encode(text): what a raw-text prompt becomes.
  absl::StatusOr<std::vector<int32_t>> EncodePrompt(std::string_view text) const;
  // The most bytes of input text that one token of Encode's output stands for
  // (the longest piece, widened by a normalizer that shortens text), so that
  // a text of B bytes has at least ceil(B / max_bytes_per_token()) tokens and
  // a caller can refuse an oversized text without encoding it. 0 when no
  // bound holds: a normalizer or pre-tokenizer that deletes text, added tokens
  // that strip whitespace, or unknown characters fused into one token.
  size_t max_bytes_per_token() const { return model_->max_bytes_per_token(); }
  // Decode(ids, /*skip_special_tokens=*/true).
  std::string Decode(std::span<const int32_t> ids) const;
  // Full decode with the backend's own semantics (IncrementalDetokenizer
  // streams exactly this). tokenizer.json: exactly `tokenizers`'
  // decode(ids, skip_special_tokens): its decoder chain, where a run of byte
  // pieces that is not valid UTF-8 gives one U+FFFD per byte. tokenizer.model:
  // SentencePiece's decoding (the first visible piece loses its dummy-prefix
  // space; each invalid byte becomes U+FFFD), with control pieces written as
  // their text when not skipped. Ids out of range give nothing.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // `<bos><|turn>system\n…<turn|>\n<|turn>user\n…<turn|>\n<|turn>model\n`.
  // Role "assistant" is written "model". INVALID_ARGUMENT naming the role when
  // it is unknown.
  absl::StatusOr<std::vector<int32_t>> RenderChat(std::span<const ChatMessage> messages) const;

  // Raw bytes a token contributes to text: byte-fallback pieces give their
  // byte, "▁" becomes a space, control tokens give nothing.
  // Out-of-range ids give nothing.
  std::string TokenBytes(int32_t id) const;
  // True for control pieces (<bos>, <eos>, <pad>) and for user-defined marker
  // pieces such as "<|turn>", "<turn|>", "<mask>": tokens that never show as text.
  // tokenizer.json: an added token with "special": true.
  bool IsControl(int32_t id) const;
  // Whether Decode(ids, /*skip_special_tokens=*/true) drops the token; the
  // same set as IsControl.
  bool IsSpecial(int32_t id) const;
  // What the token contributes when special tokens are not skipped: its text
  // for special tokens (e.g. "<bos>"), otherwise TokenBytes(id). Out-of-range
  // ids give nothing.
  std::string TokenText(int32_t id) const;
  // A byte-fallback piece ("<0xXX>"), which decodes together with its
  // neighbours.
  bool IsByteToken(int32_t id) const;
  // Whether decoding drops the leading space of the first visible piece, as
  // SentencePiece does when its normalizer adds a dummy prefix (tokenizer.json:
  // only when its decoder has a Strip of " " after a Fuse).
  bool StripsFirstSpace(int32_t id) const;

 private:
  Tokenizer() = default;
  absl::Status Init(const std::string& model_path);
  // Encodes text that follows a special token, so no dummy prefix is added
  // (tokenizer.json adds none anyway: there it is Encode).
  absl::StatusOr<std::vector<int32_t>> EncodeSegment(std::string_view text) const;
  std::unique_ptr<TokenizerModel> model_;
  SpecialTokens special_;
};

}  // namespace gemma
