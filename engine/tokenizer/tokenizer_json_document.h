// Reads the text of a Hugging Face tokenizer.json in one streaming (SAX) pass:
// /model/vocab and /model/merges, which hold hundreds of thousands of
// entries, go straight into flat vectors; everything else becomes a small
// nlohmann::json tree. Building a full tree of Gemma's 33 MB file would take
// most of a second.
//
// Thread-safety: a free function; no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace gemma {

struct TokenizerJsonDocument {
  // The file without /model/vocab and /model/merges when those had the
  // expected container type (otherwise they stay here, to be refused later
  // by name with the model type known).
  nlohmann::json tree;
  bool has_vocab = false;   // /model/vocab was an object
  bool has_merges = false;  // /model/merges was an array
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
};

// INVALID_ARGUMENT "<file_name>: <JSON path>: <what>" on malformed JSON, on a
// vocab entry that is not an id, or on a merge that is neither "a b" nor
// ["a", "b"] (both forms may not be mixed, as in `tokenizers`).
absl::StatusOr<TokenizerJsonDocument> ReadTokenizerJsonDocument(std::string_view text,
                                                                std::string_view file_name);

// "/a/b~1c/0" from path segments, escaped as RFC 6901 says.
std::string JsonPointer(const std::vector<std::string>& segments);

}  // namespace gemma
