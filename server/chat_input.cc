#include "server/chat_input.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/chat/json_depth.h"
#include "engine/tokenizer/utf8.h"
#include "server/tool_declarations.h"

namespace gemma::server {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", what));
}

absl::Status CheckUtf8(std::string_view text, absl::string_view field) {
  const size_t bad = utf8::FirstInvalidByte(text);
  if (bad == std::string_view::npos) return absl::OkStatus();
  return Invalid(field, absl::StrCat("is not valid UTF-8 (byte ", bad, ")"));
}

// Parses caller JSON; errors name the field and the parser's complaint.
absl::StatusOr<Json> ParseJsonField(std::string_view text, absl::string_view field) {
  if (absl::Status s = CheckUtf8(text, field); !s.ok()) return s;
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return Invalid(field, "is not valid JSON");
  if (std::optional<std::string> deep = JsonTooDeep(value)) {
    return Invalid(field, absl::StrCat("nests deeper than ", kMaxJsonDepth, " levels (at ", *deep, ")"));
  }
  return value;
}

bool IsKnownRole(std::string_view role) {
  static constexpr std::string_view kRoles[] = {"system", "developer", "user",
                                                "assistant", "model", "tool"};
  return std::find(std::begin(kRoles), std::end(kRoles), role) != std::end(kRoles);
}

absl::StatusOr<Json> ConvertContentParts(const v1::ChatMessage& message, const std::string& at) {
  Json parts = Json::array();
  for (int i = 0; i < message.content_parts_size(); ++i) {
    const v1::ContentPart& part = message.content_parts(i);
    const std::string field = absl::StrCat(at, ".content_parts[", i, "]");
    if (part.type() != "text") {
      if (part.type().empty()) return Invalid(absl::StrCat(field, ".type"), "must be set (\"text\")");
      return Invalid(absl::StrCat(field, ".type"),
                     absl::StrCat("= \"", part.type(),
                                  "\": vision input is not supported (only \"text\" parts are)"));
    }
    if (absl::Status s = CheckUtf8(part.text(), absl::StrCat(field, ".text")); !s.ok()) return s;
    parts.push_back(Json{{"type", "text"}, {"text", part.text()}});
  }
  return parts;
}

// Arguments are a JSON object where they parse as one (templates render a
// mapping argument by argument), else the caller's string as it is.
absl::StatusOr<Json> ConvertToolCall(const v1::ToolCall& call, const std::string& field) {
  if (call.name().empty()) return Invalid(absl::StrCat(field, ".name"), "must not be empty");
  if (absl::Status s = CheckUtf8(call.arguments(), absl::StrCat(field, ".arguments")); !s.ok()) {
    return s;
  }
  Json arguments = Json::parse(call.arguments(), nullptr, /*allow_exceptions=*/false);
  if (call.arguments().empty()) arguments = Json::object();
  if (arguments.is_discarded() || !arguments.is_object()) arguments = call.arguments();
  if (std::optional<std::string> deep = JsonTooDeep(arguments)) {
    return Invalid(absl::StrCat(field, ".arguments"),
                   absl::StrCat("nests deeper than ", kMaxJsonDepth, " levels (at ", *deep, ")"));
  }
  Json out = Json::object();
  if (!call.id().empty()) out["id"] = call.id();
  out["type"] = "function";
  out["function"] = Json{{"name", call.name()}, {"arguments", std::move(arguments)}};
  return out;
}

absl::StatusOr<Json> ConvertMessage(const v1::ChatMessage& message, const std::string& at) {
  if (!IsKnownRole(message.role())) {
    return Invalid(absl::StrCat(at, ".role"),
                   absl::StrCat("is unknown: '", absl::CHexEscape(message.role()),
                                "' (expected system, developer, user, assistant, model or tool)"));
  }
  Json out = Json::object();
  out["role"] = message.role();
  if (message.content_parts_size() > 0) {
    if (!message.content().empty()) {
      return Invalid(at, "sets both content and content_parts; use one");
    }
    absl::StatusOr<Json> parts = ConvertContentParts(message, at);
    if (!parts.ok()) return parts.status();
    out["content"] = *std::move(parts);
  } else {
    if (absl::Status s = CheckUtf8(message.content(), absl::StrCat(at, ".content")); !s.ok()) {
      return s;
    }
    out["content"] = message.content();
  }
  if (message.tool_calls_size() > 0) {
    Json calls = Json::array();
    for (int i = 0; i < message.tool_calls_size(); ++i) {
      absl::StatusOr<Json> call =
          ConvertToolCall(message.tool_calls(i), absl::StrCat(at, ".tool_calls[", i, "]"));
      if (!call.ok()) return call.status();
      calls.push_back(*std::move(call));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (!message.tool_call_id().empty()) out["tool_call_id"] = message.tool_call_id();
  if (!message.name().empty()) out["name"] = message.name();
  if (!message.reasoning_content().empty()) {
    const std::string field = absl::StrCat(at, ".reasoning_content");
    if (absl::Status s = CheckUtf8(message.reasoning_content(), field); !s.ok()) return s;
    out["reasoning_content"] = message.reasoning_content();
  }
  return out;
}

absl::Status ConvertTools(const v1::Chat& chat, absl::string_view field, ChatInput* out) {
  if (chat.tools().empty()) return absl::OkStatus();
  const std::string at = absl::StrCat(field, ".tools");
  absl::StatusOr<Json> tools = ParseJsonField(chat.tools(), at);
  if (!tools.ok()) return tools.status();
  if (auto problem = ToolDeclarationProblem(*tools)) return Invalid(at + problem->first, problem->second);
  if (!tools->empty()) out->tools = *std::move(tools);
  return absl::OkStatus();
}

absl::Status ConvertKwargs(const v1::Chat& chat, absl::string_view field, ChatInput* out) {
  if (chat.template_kwargs().empty()) return absl::OkStatus();
  const std::string at = absl::StrCat(field, ".template_kwargs");
  absl::StatusOr<Json> kwargs = ParseJsonField(chat.template_kwargs(), at);
  if (!kwargs.ok()) return kwargs.status();
  if (!kwargs->is_object()) return Invalid(at, "must be a JSON object");
  for (const auto& [key, value] : kwargs->items()) {
    static constexpr std::string_view kReserved[] = {"messages", "tools", "add_generation_prompt",
                                                     "bos_token", "eos_token"};
    if (std::find(std::begin(kReserved), std::end(kReserved), key) != std::end(kReserved)) {
      return Invalid(absl::StrCat(at, ".", key),
                     "is set by the server (use the Chat fields instead)");
    }
  }
  out->template_kwargs = *std::move(kwargs);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatInput> ConvertChat(const v1::Chat& chat, absl::string_view field) {
  if (chat.messages().empty()) return Invalid(absl::StrCat(field, ".messages"), "must not be empty");
  ChatInput out;
  for (int i = 0; i < chat.messages_size(); ++i) {
    absl::StatusOr<Json> message =
        ConvertMessage(chat.messages(i), absl::StrCat(field, ".messages[", i, "]"));
    if (!message.ok()) return message.status();
    out.messages.push_back(*std::move(message));
  }
  if (absl::Status s = ConvertTools(chat, field, &out); !s.ok()) return s;
  if (absl::Status s = ConvertKwargs(chat, field, &out); !s.ok()) return s;
  if (chat.has_add_generation_prompt()) out.add_generation_prompt = chat.add_generation_prompt();
  return out;
}

absl::StatusOr<std::string> ForcedToolCallOpening(const v1::Chat& chat, absl::string_view field) {
  if (!chat.has_forced_tool_call()) return std::string();
  const std::string at = absl::StrCat(field, ".forced_tool_call");
  if (chat.has_add_generation_prompt() && !chat.add_generation_prompt()) {
    return Invalid(at, "needs add_generation_prompt (the call opens the model's turn)");
  }
  if (chat.tools().empty()) return Invalid(at, "needs tools");
  absl::StatusOr<Json> tools = ParseJsonField(chat.tools(), absl::StrCat(field, ".tools"));
  if (!tools.ok()) return tools.status();
  if (!tools->is_array() || tools->empty()) return Invalid(at, "needs tools");
  const std::string& name = chat.forced_tool_call();
  if (name.empty()) return std::string("<|tool_call>call:");
  for (const Json& tool : *tools) {
    if (tool.is_object() && tool.contains("function") && tool["function"].is_object() &&
        tool["function"].value("name", "") == name) {
      return absl::StrCat("<|tool_call>call:", name, "{");
    }
  }
  return Invalid(at, absl::StrCat("= \"", name, "\" is not the name of a function in tools"));
}

}  // namespace gemma::server
