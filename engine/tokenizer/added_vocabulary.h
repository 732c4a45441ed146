// Added tokens of a Hugging Face tokenizer (`added_tokens` of tokenizer.json)
// and how `tokenizers`' AddedVocabulary finds them in text: the leftmost,
// then longest, occurrence wins; scanning resumes after it. `lstrip` /
// `rstrip` tokens also take the whitespace (Unicode White_Space) beside them.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace gemma {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// A piece of text: either an added token (`id` >= 0) or text to tokenize.
struct TextSplit {
  size_t begin;
  size_t end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[i]` is the text matched for `tokens[i]` (its content, or the
  // normalized content for normalized tokens). Empty patterns never match.
  AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                    const std::vector<std::string>& patterns);

  bool empty() const { return num_patterns_ == 0; }
  // Splits `text` around the added tokens found in it, in order; adjacent
  // non-token text is one split. Appends to `splits`.
  void Split(std::string_view text, std::vector<TextSplit>& splits) const;

 private:
  struct Match {
    size_t end = 0;
    int32_t token = -1;  // index into tokens_
  };
  Match LongestAt(std::string_view text, size_t pos) const;
  int32_t Child(int32_t node, unsigned char byte) const;

  struct Flags {
    int32_t id;
    bool lstrip, rstrip;
  };
  std::vector<Flags> tokens_;
  // Trie: node 0 is the root; edges keyed by (node << 8 | byte).
  absl::flat_hash_map<uint64_t, int32_t> edges_;
  std::vector<int32_t> terminal_;  // by node: token index ending here, or -1
  bool first_bytes_[256] = {};
  size_t num_patterns_ = 0;
};

// Rust's char::is_whitespace (Unicode White_Space) for the character at
// text[pos]; its byte length in `length`, 0 when not whitespace.
size_t WhitespaceLengthAt(std::string_view text, size_t pos);
size_t WhitespaceLengthBefore(std::string_view text, size_t end);

}  // namespace gemma
