// Streaming detokenization with the text before it as context.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gemma {

class Tokenizer;

// Turns a stream of token ids into text deltas such that
//   Decode(context) + concat(deltas) + Flush() == Decode(context + ids)
// for the tokenizer's own Decode (same skip_special_tokens). Like vLLM's
// prefix / read offsets: each Push decodes a short window that starts a few
// tokens back (so a leading space, a byte-fallback run or a dummy-prefix strip
// is decided with its neighbours) and emits what the new tokens added. Text is
// held while the window ends in U+FFFD (an unfinished byte-fallback run), so a
// delta never splits a character.
//
// Thread-safety: one per sequence; not thread-safe.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer, bool skip_special_tokens = true);

  // The ids that precede the first pushed token (the prompt). Their text is
  // not emitted; only its end matters. Call before the first Push.
  void SetContext(std::span<const int32_t> context_ids);
  // The text the token completes (possibly empty).
  std::string Push(int32_t token_id);
  // Whatever is still held at the end (an unfinished run as U+FFFD).
  std::string Flush();

 private:
  std::string DecodeRange(size_t begin, size_t end) const;
  // Moves `start` back so that it does not cut a byte-fallback run and the
  // window before `read` decodes to some text (when there is any before it);
  // *text: the decode of [returned start, read).
  size_t WindowStart(size_t start, size_t read, std::string* text) const;
  // After read_offset_ moved: a new window start and its decoded prefix.
  void MoveWindow();

  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;  // context tail + pushed tokens
  size_t prefix_offset_ = 0;  // window start: text before read_offset_ is already out
  size_t read_offset_ = 0;    // first token whose text is not out yet
  std::string prefix_text_;   // Decode(ids_[prefix_offset_, read_offset_))
};

}  // namespace gemma
