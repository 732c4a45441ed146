// Parses a Hugging Face tokenizer.json into a plain description, accepting
// exactly what Gemma's tokenizers use and refusing anything else by name and
// JSON path:
//   model          BPE (byte_fallback, fuse_unk, unk_token, ignore_merges,
//                  vocab, merges as "a b" or ["a", "b"])
//   added_tokens   special or not; lstrip / rstrip / normalized; single_word
//                  must be false
//   normalizer     null, Replace (String pattern), or a Sequence of those
//   pre_tokenizer  null, or Split on a String pattern (not inverted)
//   decoder        null, Replace (String pattern), ByteFallback, Fuse, Strip,
//                  or a Sequence of those
//   post_processor ignored (it only adds tokens when asked to)
//
// Thread-safety: free functions; no shared state.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/added_vocabulary.h"
#include "engine/tokenizer/bpe_decoder.h"
#include "engine/tokenizer/bpe_model.h"

namespace gemma {

// A Replace normalizer: every occurrence of `pattern` becomes `content`.
struct ReplaceRule {
  std::string pattern;
  std::string content;
};

// `tokenizers`' SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitRule {
  std::string pattern;
  SplitBehavior behavior = SplitBehavior::kRemoved;
};

struct TokenizerJsonSpec {
  BpeSpec model;
  std::vector<AddedToken> added_tokens;
  std::vector<ReplaceRule> normalizer;  // applied in order
  std::optional<SplitRule> pre_tokenizer;
  std::vector<DecoderStep> decoder;     // empty: tokens joined with " "
};

// INVALID_ARGUMENT "<file_name>: <JSON path>: <what>" for malformed, wrongly
// typed or unsupported content.
absl::StatusOr<TokenizerJsonSpec> ParseTokenizerJson(std::string_view text,
                                                     std::string_view file_name);

}  // namespace gemma
