// The parts of a Hugging Face tokenizer_config.json the engine uses: the
// special tokens by content and the chat template.
//
// Thread-safety: a free function; no shared state.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gemma {

struct TokenizerConfig {
  // Contents of the special tokens; each may be written as a string or as
  // {"content": "..."}. Unset when absent or null.
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  // The Jinja chat template; empty when absent.
  std::string chat_template;
};

// INVALID_ARGUMENT "<file_name>: <JSON path>: <what>" when the text is not a
// JSON object or a field has the wrong type. `chat_template` may also be a
// list of {"name", "template"}: the one named "default" is taken.
absl::StatusOr<TokenizerConfig> ParseTokenizerConfig(std::string_view text,
                                                     std::string_view file_name);

}  // namespace gemma
