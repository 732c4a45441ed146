// The shape of a chat's tool declarations that chat templates rely on
// (OpenAI's: [{"type": "function", "function": {"name", "parameters"}}]),
// checked the same way for gRPC's Chat.tools and the OpenAI API's tools.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace gemma::server {

// The first problem of `tools` as (path below the field, what is wrong), e.g.
// ("[0].function.name", "must be a non-empty string"); nullopt when it has
// none. J: an nlohmann json type.
template <typename J>
std::optional<std::pair<std::string, std::string>> ToolDeclarationProblem(const J& tools) {
  if (!tools.is_array()) return std::pair<std::string, std::string>{"", "must be a list of tool declarations"};
  for (size_t i = 0; i < tools.size(); ++i) {
    const J& tool = tools[i];
    std::string at = std::to_string(i);  // "[i]", built in place (GCC 12 warns on "[" + string)
    at.insert(at.begin(), '[');
    at.push_back(']');
    if (!tool.is_object()) return std::pair{at, std::string("must be an object")};
    if (const auto type = tool.find("type"); type != tool.end() && *type != "function") {
      return std::pair{at + ".type", "must be \"function\", got " + type->dump()};
    }
    const auto function = tool.find("function");
    if (function == tool.end() || !function->is_object()) {
      return std::pair{at + ".function", std::string("must be an object ({\"name\", \"parameters\", ...})")};
    }
    const auto name = function->find("name");
    if (name == function->end() || !name->is_string() || name->template get<std::string>().empty()) {
      return std::pair{at + ".function.name", std::string("must be a non-empty string")};
    }
    // Templates walk the parameters and their properties as mappings.
    if (const auto params = function->find("parameters"); params != function->end() && !params->is_null()) {
      if (!params->is_object()) return std::pair{at + ".function.parameters", std::string("must be a JSON Schema object")};
      if (const auto props = params->find("properties"); props != params->end() && !props->is_object()) {
        return std::pair{at + ".function.parameters.properties", std::string("must be an object")};
      }
    }
  }
  return std::nullopt;
}

}  // namespace gemma::server
