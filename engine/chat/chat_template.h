// Renders Hugging Face chat templates byte-identically to transformers' apply_chat_template
// (Python jinja2 in an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks,
// loopcontrols, transformers' `tojson`, `raise_exception` and `strftime_now`).
#ifndef GEMMA_ENGINE_CHAT_CHAT_TEMPLATE_H_
#define GEMMA_ENGINE_CHAT_CHAT_TEMPLATE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gemma {

// Thread-safety: immutable after Parse/LoadFromModelDir; Render may run concurrently.
class ChatTemplate {
 public:
  // Parses template source. A syntax error or an unsupported construct ({% include %}, {% call %},
  // an unknown filter or test, ...) is INVALID_ARGUMENT "origin:line: message naming the construct".
  static absl::StatusOr<ChatTemplate> Parse(std::string source, std::string origin);

  // Parses the file at `path`; NOT_FOUND naming it when it cannot be read.
  static absl::StatusOr<ChatTemplate> LoadFile(const std::string& path);

  // Reads `dir`/chat_template.jinja, else the "chat_template" of
  // `dir`/tokenizer_config.json (a string, or a list of {"name", "template"}
  // whose "default" entry is taken); NOT_FOUND when neither exists.
  static absl::StatusOr<ChatTemplate> LoadFromModelDir(const std::string& dir);

  // Renders with the variables transformers passes: `messages`, `tools` (None when `tools` is
  // null, as transformers passes tools=None, so `tools is defined` holds and `tools is none`
  // tells), `documents` (None), `add_generation_prompt`, `bos_token`, `eos_token`, then every
  // key of `extra` (an object such as {"enable_thinking": true}; its keys override the former).
  // Errors: raise_exception(msg) → INVALID_ARGUMENT with exactly `msg`; any other template error
  // (undefined attribute access, type error, unsafe method) → INVALID_ARGUMENT
  // "origin:line: jinja2's message".
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                     bool add_generation_prompt, const nlohmann::ordered_json& extra,
                                     std::string_view bos_token, std::string_view eos_token) const;

  const std::string& origin() const { return origin_; }
  const std::string& source() const { return source_; }

 private:
  ChatTemplate(std::string source, std::string origin, std::shared_ptr<const void> program);

  std::string source_;
  std::string origin_;
  std::shared_ptr<const void> program_;  // jinja::StmtList
};

}  // namespace gemma

#endif  // GEMMA_ENGINE_CHAT_CHAT_TEMPLATE_H_
