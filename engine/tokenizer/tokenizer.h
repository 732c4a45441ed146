// SentencePiece tokenizer for Gemma 4, with special tokens looked up by piece
// (never hard-coded ids: the fixtures' tokenizer has other ids than the real
// one) and the Gemma 4 chat format.
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

namespace gemma {

class SentencePieceModel;

struct SpecialTokens {
  int32_t pad = -1, eos = -1, bos = -1, unk = -1;
  int32_t turn_start = -1;  // "<|turn>"
  int32_t turn_end = -1;    // "<turn|>"
};

struct ChatMessage {
  std::string role;     // system | user | assistant | model
  std::string content;
};

class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& model_path);
  ~Tokenizer();

  int vocab_size() const;
  const SpecialTokens& special() const { return special_; }
  // Id of a piece, or -1 when the vocabulary lacks it.
  int32_t PieceToId(std::string_view piece) const;
  std::string IdToPiece(int32_t id) const;

  // Plain encoding, no BOS. INVALID_ARGUMENT on invalid UTF-8.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const;
  // BOS + Encode(text): what a raw-text prompt becomes.
  absl::StatusOr<std::vector<int32_t>> EncodePrompt(std::string_view text) const;
  // Full decode of ids (special tokens rendered as their pieces are dropped).
  std::string Decode(std::span<const int32_t> ids) const;

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
  bool IsControl(int32_t id) const;

 private:
  friend class IncrementalDetokenizer;
  Tokenizer() = default;
  absl::Status Init(const std::string& model_path);
  // Encodes text that follows a special token, so no dummy prefix is added.
  absl::StatusOr<std::vector<int32_t>> EncodeSegment(std::string_view text) const;
  // Whether decoding drops the leading "▁" of the first visible piece, as
  // SentencePiece does when its normalizer adds a dummy prefix.
  bool StripsFirstSpace(int32_t id) const;

  std::unique_ptr<SentencePieceModel> sp_;
  SpecialTokens special_;
  std::vector<bool> control_;  // by id: IsControl()
  bool adds_dummy_prefix_ = false;
};

// Turns a stream of token ids into text deltas that never split a UTF-8
// character: bytes of an incomplete character are held until it completes.
// Thread-safety: one per sequence; not thread-safe.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}
  // Returns the complete text the token finishes (possibly empty).
  std::string Push(int32_t token_id);
  // Whatever is still held at the end (invalid sequences become U+FFFD).
  std::string Flush();

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;     // bytes of a character not yet complete
  bool at_start_ = true;    // no visible token seen yet
};

}  // namespace gemma
