#include "engine/tokenizer/tokenizer_json.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/json_fields.h"
#include "engine/tokenizer/status_macros.h"
#include "engine/tokenizer/tokenizer_json_document.h"

namespace gemma {
namespace {

using Json = nlohmann::json;
constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max();

absl::Status Unsupported(const JsonFields& fields, std::string_view path, std::string_view what,
                         std::string_view type) {
  return fields.Error(path, absl::StrCat("unsupported ", std::string(what), " \"", std::string(type), "\""));
}

// A {"String": "..."} pattern; Regex patterns are refused.
absl::StatusOr<std::string> StringPattern(const JsonFields& fields, const Json& object,
                                          const std::string& path) {
  const std::string pattern_path = JsonFields::Child(path, "pattern");
  const Json* pattern = JsonFields::Find(object, "pattern");
  if (pattern == nullptr) return fields.Error(pattern_path, "expected an object");
  TOKENIZER_RETURN_IF_ERROR(fields.ExpectObject(*pattern, pattern_path));
  if (JsonFields::Find(*pattern, "Regex") != nullptr) {
    return fields.Error(JsonFields::Child(pattern_path, "Regex"),
                        "unsupported pattern: only String patterns are supported");
  }
  TOKENIZER_ASSIGN_OR_RETURN(std::string text, fields.String(*pattern, "String", pattern_path));
  if (text.empty()) return fields.Error(JsonFields::Child(pattern_path, "String"), "empty pattern");
  return text;
}

absl::Status ParseModel(const JsonFields& fields, TokenizerJsonDocument& document,
                        BpeSpec& model) {
  const Json* node = JsonFields::Find(document.tree, "model");
  if (node == nullptr) return fields.Error("/model", "expected an object");
  TOKENIZER_RETURN_IF_ERROR(fields.ExpectObject(*node, "/model"));
  TOKENIZER_ASSIGN_OR_RETURN(std::string type, fields.String(*node, "type", "/model"));
  if (type != "BPE") return Unsupported(fields, "/model/type", "model type", type);
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* value = JsonFields::Find(*node, key);
    if (value != nullptr && !(value->is_string() && value->get<std::string>().empty())) {
      return fields.Error(JsonFields::Child("/model", key), "unsupported: must be null");
    }
  }
  if (JsonFields::Find(*node, "unk_token") != nullptr) {
    TOKENIZER_ASSIGN_OR_RETURN(model.unk_token, fields.String(*node, "unk_token", "/model"));
  }
  TOKENIZER_ASSIGN_OR_RETURN(model.byte_fallback, fields.Bool(*node, "byte_fallback", "/model", false));
  TOKENIZER_ASSIGN_OR_RETURN(model.fuse_unk, fields.Bool(*node, "fuse_unk", "/model", false));
  TOKENIZER_ASSIGN_OR_RETURN(model.ignore_merges, fields.Bool(*node, "ignore_merges", "/model", false));
  if (!document.has_vocab) return fields.Error("/model/vocab", "expected an object");
  if (!document.has_merges) return fields.Error("/model/merges", "expected an array");
  model.vocab = std::move(document.vocab);
  model.merges = std::move(document.merges);
  return absl::OkStatus();
}

absl::StatusOr<AddedToken> ParseAddedToken(const JsonFields& fields, const Json& node,
                                           const std::string& path) {
  TOKENIZER_RETURN_IF_ERROR(fields.ExpectObject(node, path));
  AddedToken token;
  TOKENIZER_ASSIGN_OR_RETURN(const int64_t id, fields.Count(node, "id", path, kMaxId));
  token.id = static_cast<int32_t>(id);
  TOKENIZER_ASSIGN_OR_RETURN(token.content, fields.String(node, "content", path));
  TOKENIZER_ASSIGN_OR_RETURN(token.special, fields.Bool(node, "special", path, false));
  TOKENIZER_ASSIGN_OR_RETURN(token.lstrip, fields.Bool(node, "lstrip", path, false));
  TOKENIZER_ASSIGN_OR_RETURN(token.rstrip, fields.Bool(node, "rstrip", path, false));
  TOKENIZER_ASSIGN_OR_RETURN(token.normalized, fields.Bool(node, "normalized", path, false));
  TOKENIZER_ASSIGN_OR_RETURN(const bool single_word, fields.Bool(node, "single_word", path, false));
  if (single_word) {
    return fields.Error(JsonFields::Child(path, "single_word"), "unsupported: must be false");
  }
  return token;
}

absl::Status ParseAddedTokens(const JsonFields& fields, const Json& tree,
                              std::vector<AddedToken>& tokens) {
  const Json* node = JsonFields::Find(tree, "added_tokens");
  if (node == nullptr) return absl::OkStatus();
  TOKENIZER_RETURN_IF_ERROR(fields.ExpectArray(*node, "/added_tokens"));
  for (size_t i = 0; i < node->size(); ++i) {
    TOKENIZER_ASSIGN_OR_RETURN(AddedToken token,
                               ParseAddedToken(fields, (*node)[i], JsonFields::Child("/added_tokens", i)));
    tokens.push_back(std::move(token));
  }
  return absl::OkStatus();
}

absl::Status ParseNormalizer(const JsonFields& fields, const Json& node, const std::string& path,
                             std::vector<ReplaceRule>& rules) {
  TOKENIZER_RETURN_IF_ERROR(fields.ExpectObject(node, path));
  TOKENIZER_ASSIGN_OR_RETURN(std::string type, fields.String(node, "type", path));
  if (type == "Replace") {
    ReplaceRule rule;
    TOKENIZER_ASSIGN_OR_RETURN(rule.pattern, StringPattern(fields, node, path));
    TOKENIZER_ASSIGN_OR_RETURN(rule.content, fields.String(node, "content", path));
    rules.push_back(std::move(rule));
    return absl::OkStatus();
  }
  if (type != "Sequence") return Unsupported(fields, JsonFields::Child(path, "type"), "normalizer", type);
  const std::string list_path = JsonFields::Child(path, "normalizers");
  const Json* list = JsonFields::Find(node, "normalizers");
  if (list == nullptr) return fields.Error(list_path, "expected an array");
  TOKENIZER_RETURN_IF_ERROR(fields.ExpectArray(*list, list_path));
  for (size_t i = 0; i < list->size(); ++i) {
    TOKENIZER_RETURN_IF_ERROR(ParseNormalizer(fields, (*list)[i], JsonFields::Child(list_path, i), rules));
  }
  return absl::OkStatus();
}

absl::StatusOr<SplitRule> ParseSplit(const JsonFields& fields, const Json& node) {
  const std::string path = "/pre_tokenizer";
  TOKENIZER_RETURN_IF_ERROR(fields.ExpectObject(node, path));
  TOKENIZER_ASSIGN_OR_RETURN(std::string type, fields.String(node, "type", path));
  if (type != "Split") return Unsupported(fields, "/pre_tokenizer/type", "pre-tokenizer", type);
  SplitRule rule;
  TOKENIZER_ASSIGN_OR_RETURN(rule.pattern, StringPattern(fields, node, path));
  TOKENIZER_ASSIGN_OR_RETURN(std::string behavior, fields.String(node, "behavior", path));
  static constexpr std::pair<std::string_view, SplitBehavior> kBehaviors[] = {
      {"Removed", SplitBehavior::kRemoved},
      {"Isolated", SplitBehavior::kIsolated},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous}};
  bool known = false;
  for (const auto& [name, value] : kBehaviors) {
    if (behavior == name) rule.behavior = value, known = true;
  }
  if (!known) return Unsupported(fields, "/pre_tokenizer/behavior", "split behavior", behavior);
  TOKENIZER_ASSIGN_OR_RETURN(const bool invert, fields.Bool(node, "invert", path, false));
  if (invert) return fields.Error("/pre_tokenizer/invert", "unsupported: must be false");
  return rule;
}

absl::Status ParseStrip(const JsonFields& fields, const Json& node, const std::string& path,
                        DecoderStep& step) {
  TOKENIZER_ASSIGN_OR_RETURN(step.strip_char, fields.String(node, "content", path));
  const size_t lead = step.strip_char.empty() ? 0 : static_cast<unsigned char>(step.strip_char[0]);
  const size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (step.strip_char.size() != length) {
    return fields.Error(JsonFields::Child(path, "content"), "expected one character");
  }
  TOKENIZER_ASSIGN_OR_RETURN(const int64_t start, fields.Count(node, "start", path, kMaxId));
  TOKENIZER_ASSIGN_OR_RETURN(const int64_t stop, fields.Count(node, "stop", path, kMaxId));
  step.strip_start = static_cast<size_t>(start);
  step.strip_stop = static_cast<size_t>(stop);
  return absl::OkStatus();
}

absl::Status ParseDecoder(const JsonFields& fields, const Json& node, const std::string& path,
                          std::vector<DecoderStep>& steps) {
  TOKENIZER_RETURN_IF_ERROR(fields.ExpectObject(node, path));
  TOKENIZER_ASSIGN_OR_RETURN(std::string type, fields.String(node, "type", path));
  DecoderStep step;
  if (type == "Replace") {
    step.kind = DecoderStep::Kind::kReplace;
    TOKENIZER_ASSIGN_OR_RETURN(step.pattern, StringPattern(fields, node, path));
    TOKENIZER_ASSIGN_OR_RETURN(step.content, fields.String(node, "content", path));
  } else if (type == "ByteFallback" || type == "Fuse") {
    step.kind = type == "Fuse" ? DecoderStep::Kind::kFuse : DecoderStep::Kind::kByteFallback;
  } else if (type == "Strip") {
    step.kind = DecoderStep::Kind::kStrip;
    TOKENIZER_RETURN_IF_ERROR(ParseStrip(fields, node, path, step));
  } else if (type == "Sequence") {
    const std::string list_path = JsonFields::Child(path, "decoders");
    const Json* list = JsonFields::Find(node, "decoders");
    if (list == nullptr) return fields.Error(list_path, "expected an array");
    TOKENIZER_RETURN_IF_ERROR(fields.ExpectArray(*list, list_path));
    for (size_t i = 0; i < list->size(); ++i) {
      TOKENIZER_RETURN_IF_ERROR(ParseDecoder(fields, (*list)[i], JsonFields::Child(list_path, i), steps));
    }
    return absl::OkStatus();
  } else {
    return Unsupported(fields, JsonFields::Child(path, "type"), "decoder", type);
  }
  steps.push_back(std::move(step));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerJsonSpec> ParseTokenizerJson(std::string_view text,
                                                     std::string_view file_name) {
  TOKENIZER_ASSIGN_OR_RETURN(TokenizerJsonDocument document,
                             ReadTokenizerJsonDocument(text, file_name));
  const JsonFields fields(file_name);
  TOKENIZER_RETURN_IF_ERROR(fields.ExpectObject(document.tree, "/"));
  TokenizerJsonSpec spec;
  TOKENIZER_RETURN_IF_ERROR(ParseModel(fields, document, spec.model));
  TOKENIZER_RETURN_IF_ERROR(ParseAddedTokens(fields, document.tree, spec.added_tokens));
  if (const Json* node = JsonFields::Find(document.tree, "normalizer")) {
    TOKENIZER_RETURN_IF_ERROR(ParseNormalizer(fields, *node, "/normalizer", spec.normalizer));
  }
  if (const Json* node = JsonFields::Find(document.tree, "pre_tokenizer")) {
    TOKENIZER_ASSIGN_OR_RETURN(spec.pre_tokenizer, ParseSplit(fields, *node));
  }
  if (const Json* node = JsonFields::Find(document.tree, "decoder")) {
    TOKENIZER_RETURN_IF_ERROR(ParseDecoder(fields, *node, "/decoder", spec.decoder));
    // An empty Sequence still joins with "" rather than " ".
    if (spec.decoder.empty()) spec.decoder.emplace_back().kind = DecoderStep::Kind::kFuse;
  }
  return spec;
}

}  // namespace gemma
