#include "engine/tokenizer/tokenizer_config.h"

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/json_fields.h"
#include "engine/tokenizer/status_macros.h"

namespace gemma {
namespace {

using Json = nlohmann::json;

absl::StatusOr<std::optional<std::string>> TokenContent(const JsonFields& fields, const Json& root,
                                                        std::string_view key) {
  const Json* node = JsonFields::Find(root, key);
  if (node == nullptr) return std::optional<std::string>();
  if (node->is_string()) return std::optional<std::string>(node->get<std::string>());
  const std::string path = JsonFields::Child("", key);
  if (!node->is_object()) return fields.Error(path, "expected a string or {\"content\": ...}");
  TOKENIZER_ASSIGN_OR_RETURN(std::string content, fields.String(*node, "content", path));
  return std::optional<std::string>(std::move(content));
}

absl::StatusOr<std::string> ChatTemplate(const JsonFields& fields, const Json& root) {
  const Json* node = JsonFields::Find(root, "chat_template");
  if (node == nullptr) return std::string();
  if (node->is_string()) return node->get<std::string>();
  if (!node->is_array()) return fields.Error("/chat_template", "expected a string or an array");
  for (size_t i = 0; i < node->size(); ++i) {
    const std::string path = JsonFields::Child("/chat_template", i);
    TOKENIZER_RETURN_IF_ERROR(fields.ExpectObject((*node)[i], path));
    TOKENIZER_ASSIGN_OR_RETURN(std::string name, fields.String((*node)[i], "name", path));
    TOKENIZER_ASSIGN_OR_RETURN(std::string text, fields.String((*node)[i], "template", path));
    if (name == "default") return text;
  }
  return std::string();
}

}  // namespace

absl::StatusOr<TokenizerConfig> ParseTokenizerConfig(std::string_view text,
                                                     std::string_view file_name) {
  const JsonFields fields(file_name);
  Json root = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return fields.Error("/", "invalid JSON");
  TOKENIZER_RETURN_IF_ERROR(fields.ExpectObject(root, "/"));
  TokenizerConfig config;
  TOKENIZER_ASSIGN_OR_RETURN(config.bos_token, TokenContent(fields, root, "bos_token"));
  TOKENIZER_ASSIGN_OR_RETURN(config.eos_token, TokenContent(fields, root, "eos_token"));
  TOKENIZER_ASSIGN_OR_RETURN(config.pad_token, TokenContent(fields, root, "pad_token"));
  TOKENIZER_ASSIGN_OR_RETURN(config.unk_token, TokenContent(fields, root, "unk_token"));
  TOKENIZER_ASSIGN_OR_RETURN(config.chat_template, ChatTemplate(fields, root));
  return config;
}

}  // namespace gemma
