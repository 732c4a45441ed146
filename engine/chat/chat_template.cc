#include "engine/chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "engine/chat/jinja/interpreter.h"
#include "engine/chat/json_depth.h"
#include "engine/chat/jinja/parser.h"

namespace gemma {
namespace {

absl::Status ToStatus(const jinja::TemplateError& e, const std::string& origin) {
  if (e.kind == jinja::ErrorKind::kRaised) return absl::InvalidArgumentError(e.message);
  return absl::InvalidArgumentError(origin + ":" + std::to_string(e.line) + ": " + e.message);
}

std::optional<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string origin, std::shared_ptr<const void> program)
    : source_(std::move(source)), origin_(std::move(origin)), program_(std::move(program)) {}

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string source, std::string origin) {
  try {
    auto program = std::make_shared<const jinja::StmtList>(jinja::ParseTemplate(source));
    return ChatTemplate(std::move(source), std::move(origin), std::move(program));
  } catch (const jinja::TemplateError& e) {
    return absl::InvalidArgumentError(origin + ":" + std::to_string(e.line) + ": " + e.message);
  }
}

absl::StatusOr<ChatTemplate> ChatTemplate::LoadFile(const std::string& path) {
  std::optional<std::string> text = ReadFile(path);
  if (!text) return absl::NotFoundError("cannot read chat template " + path);
  // An empty file would render every chat as an empty prompt.
  if (text->find_first_not_of(" \t\r\n") == std::string::npos) {
    return absl::InvalidArgumentError("chat template " + path + " is empty");
  }
  return Parse(std::move(*text), path);
}

absl::StatusOr<ChatTemplate> ChatTemplate::LoadFromModelDir(const std::string& dir) {
  const std::filesystem::path root(dir);
  if (auto text = ReadFile(root / "chat_template.jinja")) {
    return Parse(std::move(*text), (root / "chat_template.jinja").string());
  }
  const std::filesystem::path config_path = root / "tokenizer_config.json";
  auto config_text = ReadFile(config_path);
  if (!config_text) return absl::NotFoundError("no chat_template.jinja or tokenizer_config.json in " + dir);
  const auto config = nlohmann::ordered_json::parse(*config_text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return absl::InvalidArgumentError(config_path.string() + ": not valid JSON");
  const auto found = config.find("chat_template");
  if (found != config.end() && found->is_array()) {
    // transformers' named templates: the "default" one serves plain chats.
    for (const auto& entry : *found) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return Parse(entry["template"].get<std::string>(), config_path.string() + ":chat_template[default]");
      }
    }
  }
  if (found == config.end() || !found->is_string()) {
    return absl::NotFoundError(config_path.string() + " has no \"chat_template\" string or \"default\" entry");
  }
  return Parse(found->get<std::string>(), config_path.string() + ":chat_template");
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages,
                                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                                 const nlohmann::ordered_json& extra, std::string_view bos_token,
                                                 std::string_view eos_token) const {
  if (!extra.is_null() && !extra.is_object()) return absl::InvalidArgumentError("extra template variables must be an object");
  // The conversion below recurses once per level.
  for (const auto& [name, value] : {std::pair<const char*, const nlohmann::ordered_json*>{"messages", &messages},
                                    {"tools", &tools}, {"extra template variables", &extra}}) {
    if (std::optional<std::string> deep = JsonTooDeep(*value)) {
      return absl::InvalidArgumentError(std::string(name) + " nest deeper than " + std::to_string(kMaxJsonDepth) +
                                        " levels (at " + *deep + ")");
    }
  }
  using jinja::Value;
  jinja::Dict context;
  context.Set("messages", Value::FromJson(messages));
  context.Set("tools", Value::FromJson(tools));
  context.Set("documents", Value::None());
  context.Set("add_generation_prompt", Value::Bool(add_generation_prompt));
  context.Set("bos_token", Value::String(std::string(bos_token)));
  context.Set("eos_token", Value::String(std::string(eos_token)));
  if (extra.is_object()) {
    for (const auto& [key, value] : extra.items()) context.Set(key, Value::FromJson(value));
  }
  try {
    jinja::Interpreter interpreter;
    return interpreter.Render(*static_cast<const jinja::StmtList*>(program_.get()), context);
  } catch (const jinja::TemplateError& e) {
    return ToStatus(e, origin_);
  }
}

}  // namespace gemma
