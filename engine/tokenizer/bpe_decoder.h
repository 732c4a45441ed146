// The decoder chain of a Hugging Face tokenizer.json, restricted to the steps
// Gemma uses: Replace (string pattern), ByteFallback, Fuse, Strip. Each step
// maps the list of token strings to a new list; the result is their
// concatenation, as in `tokenizers`' Decoder::decode.
//
// Thread-safety: immutable after construction.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gemma {

struct DecoderStep {
  enum class Kind { kReplace, kByteFallback, kFuse, kStrip };
  Kind kind = Kind::kFuse;
  std::string pattern, content;  // kReplace: replace every `pattern` by `content`
  std::string strip_char;        // kStrip: one UTF-8 character
  size_t strip_start = 0, strip_stop = 0;  // kStrip: how many to strip at each end
};

class BpeDecoder {
 public:
  // No steps: tokens are joined with " " (what `tokenizers` does with no decoder).
  explicit BpeDecoder(std::vector<DecoderStep> steps = {}) : steps_(std::move(steps)) {}

  std::string Decode(std::vector<std::string> tokens) const;
  // What one token contributes when decoded on its own, except that a
  // byte-fallback piece gives its raw byte: Replace steps applied in order.
  std::string TokenText(std::string_view piece) const;
  // Whether the chain strips a leading space from the decoded text (a Strip of
  // " " with start > 0 after a Fuse, as in Llama-style decoders).
  bool StripsLeadingSpace() const;
  bool HasByteFallback() const;

 private:
  std::vector<DecoderStep> steps_;
};

// The byte of a "<0xXX>" piece as `tokenizers`' ByteFallback reads it, or -1.
int ParseBytePiece(std::string_view piece);

}  // namespace gemma
