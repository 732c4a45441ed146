#include "server/http/openai_request.h"

#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/core/request_validation.h"
#include "server/tool_declarations.h"

namespace gemma::server::http {
namespace {

using Json = nlohmann::json;

constexpr int kMaxChoices = 128;
constexpr int kMaxPrompts = 256;

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Typed access to a request body's fields; the first error is kept. A field
// that is absent or null counts as unset.
class Fields {
 public:
  explicit Fields(const Json& body) : body_(body) {}

  const Json* Get(std::string_view name) const {
    const auto it = body_.find(name);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }
  std::optional<double> Number(std::string_view name) {
    const Json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) return Fail(name, "must be a number");
    return v->get<double>();
  }
  std::optional<int64_t> Int(std::string_view name) {
    const Json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer()) return Fail(name, "must be an integer");
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT64_MAX}) {
      return Fail(name, "is out of range");
    }
    return v->get<int64_t>();
  }
  // An integer that must fit in int32 (ranges are the builder's to check).
  std::optional<int32_t> Int32(std::string_view name) {
    std::optional<int64_t> v = Int(name);
    if (!v) return std::nullopt;
    if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
      return Fail(name, absl::StrCat("is out of range, got ", *v));
    }
    return static_cast<int32_t>(*v);
  }
  std::optional<bool> Bool(std::string_view name) {
    const Json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) return Fail(name, "must be true or false");
    return v->get<bool>();
  }
  std::optional<std::string> String(std::string_view name) {
    const Json* v = Get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) return Fail(name, "must be a string");
    return v->get<std::string>();
  }

  std::nullopt_t Fail(std::string_view field, std::string_view what) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(std::string(field) + " " + std::string(what));
    return std::nullopt;
  }
  const absl::Status& status() const { return status_; }

 private:
  const Json& body_;
  absl::Status status_;
};

void ReadSampling(Fields& f, v1::SamplingParams* s) {
  if (auto v = f.Number("temperature")) s->set_temperature(static_cast<float>(*v));
  if (auto v = f.Number("top_p")) s->set_top_p(static_cast<float>(*v));
  // vLLM spells "off" -1 as well as 0.
  if (auto v = f.Int32("top_k")) s->set_top_k(*v == -1 ? 0 : *v);
  if (auto v = f.Number("min_p")) s->set_min_p(static_cast<float>(*v));
  if (auto v = f.Number("presence_penalty")) s->set_presence_penalty(static_cast<float>(*v));
  if (auto v = f.Number("frequency_penalty")) s->set_frequency_penalty(static_cast<float>(*v));
  if (auto v = f.Number("repetition_penalty")) s->set_repetition_penalty(static_cast<float>(*v));
  if (auto v = f.Int("seed")) {
    if (*v < 0) f.Fail("seed", absl::StrCat("must be >= 0, got ", *v));
    else s->set_seed(static_cast<uint64_t>(*v));
  }
}

void ReadStopping(Fields& f, const char* max_tokens_field, v1::StoppingCriteria* s) {
  if (auto v = f.Int32(max_tokens_field)) s->set_max_tokens(*v);
  if (auto v = f.Int32("min_tokens")) s->set_min_tokens(*v);
  if (auto v = f.Bool("ignore_eos")) s->set_ignore_eos(*v);
  if (const Json* stop = f.Get("stop")) {
    if (stop->is_string()) {
      s->add_stop(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const Json& item : *stop) {
        if (!item.is_string()) return (void)f.Fail("stop", "must be a string or a list of strings");
        s->add_stop(item.get<std::string>());
      }
    } else {
      f.Fail("stop", "must be a string or a list of strings");
    }
  }
  if (const Json* ids = f.Get("stop_token_ids")) {
    if (!ids->is_array()) return (void)f.Fail("stop_token_ids", "must be a list of integers");
    for (const Json& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return (void)f.Fail("stop_token_ids", "must be a list of token ids");
      }
      s->add_stop_token_ids(id.get<int32_t>());
    }
  }
}

// Fields both endpoints share, into the first prompt's proto (copied to the
// others by the caller).
void ReadCommon(Fields& f, OpenAiRequest* out, v1::GenerateRequest* proto) {
  if (auto v = f.String("model")) out->model = *v;
  if (auto v = f.Int("n")) {
    if (*v < 1 || *v > kMaxChoices) f.Fail("n", absl::StrCat("must be in [1, ", kMaxChoices, "], got ", *v));
    else out->n = static_cast<int>(*v);
  }
  if (auto v = f.Bool("stream")) out->stream = *v;
  if (const Json* options = f.Get("stream_options")) {
    if (!out->stream) {
      f.Fail("stream_options", "needs stream: true");
    } else if (!options->is_object()) {
      f.Fail("stream_options", "must be an object");
    } else if (const auto it = options->find("include_usage"); it != options->end()) {
      if (!it->is_boolean()) f.Fail("stream_options.include_usage", "must be true or false");
      else out->include_usage = it->get<bool>();
    }
  }
  if (const Json* format = f.Get("response_format")) {
    const auto type = format->is_object() ? format->find("type") : format->end();
    if (!format->is_object() || type == format->end() || !type->is_string() || *type != "text") {
      f.Fail("response_format", "is not supported (only {\"type\": \"text\"})");
    }
  }
  // Fields of the OpenAI API this server does not implement: refused, not
  // silently dropped (each would change the result the caller asked for).
  if (const Json* bias = f.Get("logit_bias"); bias != nullptr && !(bias->is_object() && bias->empty())) {
    f.Fail("logit_bias", "is not supported");
  }
  if (const Json* best_of = f.Get("best_of"); best_of != nullptr && *best_of != 1) {
    f.Fail("best_of", absl::StrCat("is not supported (only 1), got ", Dump(*best_of)));
  }
  if (auto v = f.Bool("parallel_tool_calls")) out->parallel_tool_calls = *v;
  f.String("user");  // an end-user id for the caller's records: type-checked, not used
  if (auto v = f.Bool("skip_special_tokens")) proto->set_skip_special_tokens(*v);
  if (auto v = f.Int32("priority")) proto->set_priority(*v);
  ReadSampling(f, proto->mutable_sampling());
}

absl::Status ReadContent(const Json& content, const std::string& at, v1::ChatMessage* out) {
  if (content.is_string()) {
    out->set_content(content.get<std::string>());
    return absl::OkStatus();
  }
  if (!content.is_array()) {
    return absl::InvalidArgumentError(at + " must be a string or a list of content parts");
  }
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string part_at = absl::StrCat(at, "[", i, "]");
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return absl::InvalidArgumentError(part_at + " must be an object with a \"type\"");
    }
    v1::ContentPart* p = out->add_content_parts();
    p->set_type(part["type"].get<std::string>());
    if (p->type() != "text") continue;  // refused by name where chats are checked
    if (!part.contains("text") || !part["text"].is_string()) {
      return absl::InvalidArgumentError(part_at + ".text must be a string");
    }
    p->set_text(part["text"].get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ReadToolCalls(const Json& calls, const std::string& at, v1::ChatMessage* out) {
  if (!calls.is_array()) return absl::InvalidArgumentError(at + " must be a list");
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string call_at = absl::StrCat(at, "[", i, "]");
    const Json& call = calls[i];
    const Json* function = call.is_object() && call.contains("function") ? &call["function"] : nullptr;
    if (function == nullptr || !function->is_object() || !function->contains("name") ||
        !(*function)["name"].is_string()) {
      return absl::InvalidArgumentError(call_at + " must have a function with a name");
    }
    const auto id = call.find("id");
    if (id != call.end() && !id->is_null() && !id->is_string()) {
      return absl::InvalidArgumentError(call_at + ".id must be a string");
    }
    v1::ToolCall* tc = out->add_tool_calls();
    if (id != call.end() && id->is_string()) tc->set_id(id->get<std::string>());
    tc->set_name((*function)["name"].get<std::string>());
    // OpenAI sends arguments as a JSON string; some clients send the object.
    const Json arguments = function->value("arguments", Json::object());
    tc->set_arguments(arguments.is_string() ? arguments.get<std::string>() : Dump(arguments));
  }
  return absl::OkStatus();
}

absl::Status ReadMessage(const Json& message, size_t index, v1::ChatMessage* out) {
  const std::string at = absl::StrCat("messages[", index, "]");
  if (!message.is_object()) return absl::InvalidArgumentError(at + " must be an object");
  if (!message.contains("role") || !message["role"].is_string()) {
    return absl::InvalidArgumentError(at + ".role must be a string");
  }
  out->set_role(message["role"].get<std::string>());
  auto string_field = [&](const char* name, std::string* dest) -> absl::Status {
    const auto it = message.find(name);
    if (it == message.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_string()) return absl::InvalidArgumentError(absl::StrCat(at, ".", name, " must be a string"));
    *dest = it->get<std::string>();
    return absl::OkStatus();
  };
  if (const auto it = message.find("content"); it != message.end() && !it->is_null()) {
    if (absl::Status s = ReadContent(*it, at + ".content", out); !s.ok()) return s;
  } else if (out->role() != "assistant" && out->role() != "model") {  // only a reply may be calls alone
    return absl::InvalidArgumentError(at + ".content must be set");
  }
  if (absl::Status s = string_field("tool_call_id", out->mutable_tool_call_id()); !s.ok()) return s;
  if (absl::Status s = string_field("name", out->mutable_name()); !s.ok()) return s;
  if (absl::Status s = string_field("reasoning_content", out->mutable_reasoning_content()); !s.ok()) return s;
  if (out->reasoning_content().empty()) {
    if (absl::Status s = string_field("reasoning", out->mutable_reasoning_content()); !s.ok()) return s;
  }
  if (const auto it = message.find("tool_calls"); it != message.end() && !it->is_null()) {
    return ReadToolCalls(*it, at + ".tool_calls", out);
  }
  return absl::OkStatus();
}

// tools and tool_choice into chat.tools (see the header for the policy).
absl::Status ReadTools(Fields& f, v1::Chat* chat) {
  const Json* tools = f.Get("tools");
  const Json* choice = f.Get("tool_choice");
  // Checked here too: tool_choice "none" leaves them out of the chat the gRPC path checks.
  if (tools != nullptr) {
    if (auto problem = ToolDeclarationProblem(*tools)) {
      return absl::InvalidArgumentError(absl::StrCat("tools", problem->first, " ", problem->second));
    }
  }
  std::string named;
  if (choice != nullptr) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none") return absl::OkStatus();
      if (c != "auto" && c != "required") {
        return absl::InvalidArgumentError(
            absl::StrCat("tool_choice must be \"none\", \"auto\", \"required\" or a named function, got \"", c, "\""));
      }
    } else if (choice->is_object() && choice->value("type", Json("function")) == "function" &&
               choice->contains("function") && (*choice)["function"].is_object() &&
               (*choice)["function"].contains("name") && (*choice)["function"]["name"].is_string()) {
      named = (*choice)["function"]["name"].get<std::string>();
    } else {
      return absl::InvalidArgumentError(
          "tool_choice must be a string or {\"type\": \"function\", \"function\": {\"name\"}}");
    }
  }
  if (tools == nullptr) {
    if (!named.empty() || (choice != nullptr && choice->is_string() && *choice == "required")) {
      return absl::InvalidArgumentError("tool_choice needs tools");
    }
    return absl::OkStatus();
  }
  if (named.empty()) {
    chat->set_tools(Dump(*tools));
    if (choice != nullptr && *choice == "required") chat->set_forced_tool_call("");
    return absl::OkStatus();
  }
  Json kept = Json::array();
  for (const Json& tool : *tools) {
    if (tool.is_object() && tool.contains("function") && tool["function"].is_object() &&
        tool["function"].value("name", "") == named) {
      kept.push_back(tool);
    }
  }
  if (kept.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("tool_choice names function \"", named,
                                                   "\", which is not among tools"));
  }
  chat->set_tools(Dump(kept));
  chat->set_forced_tool_call(named);
  return absl::OkStatus();
}

absl::Status ReadChat(Fields& f, v1::Chat* chat) {
  const Json* messages = f.Get("messages");
  if (messages == nullptr) return absl::InvalidArgumentError("messages must be set");
  if (!messages->is_array()) return absl::InvalidArgumentError("messages must be a list");
  for (size_t i = 0; i < messages->size(); ++i) {
    if (absl::Status s = ReadMessage((*messages)[i], i, chat->add_messages()); !s.ok()) return s;
  }
  if (absl::Status s = ReadTools(f, chat); !s.ok()) return s;
  if (const Json* kwargs = f.Get("chat_template_kwargs")) {
    if (!kwargs->is_object()) return absl::InvalidArgumentError("chat_template_kwargs must be an object");
    chat->set_template_kwargs(Dump(*kwargs));
  }
  if (auto v = f.Bool("add_generation_prompt")) chat->set_add_generation_prompt(*v);
  return f.status();
}

bool IsTokenList(const Json& value) {
  if (!value.is_array() || value.empty()) return false;
  for (const Json& item : value) {
    if (!item.is_number_integer()) return false;
  }
  return true;
}

absl::Status SetTokens(const Json& ids, v1::GenerateRequest* proto) {
  for (const Json& id : ids) {
    if (id.is_number_unsigned() && id.get<uint64_t>() > uint64_t{INT32_MAX}) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt holds token id ", id.get<uint64_t>(), ", not in the vocabulary"));
    }
    const int64_t v = id.get<int64_t>();
    if (v < 0 || v > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("prompt holds token id ", v, ", not in the vocabulary"));
    }
    proto->mutable_tokens()->add_ids(static_cast<int32_t>(v));
  }
  return absl::OkStatus();
}

// prompt: a string, a list of strings, a list of ids, or a list of id lists.
absl::Status ReadPrompts(Fields& f, const v1::GenerateRequest& common, OpenAiRequest* out) {
  const Json* prompt = f.Get("prompt");
  if (prompt == nullptr) return absl::InvalidArgumentError("prompt must be set");
  std::vector<const Json*> items;
  if (prompt->is_string() || IsTokenList(*prompt)) {
    items.push_back(prompt);
  } else if (prompt->is_array() && !prompt->empty()) {
    for (const Json& item : *prompt) items.push_back(&item);
  } else {
    return absl::InvalidArgumentError(
        "prompt must be a string, a list of strings, a list of token ids or a list of such lists");
  }
  if (items.size() > kMaxPrompts) {
    return absl::InvalidArgumentError(absl::StrCat("prompt holds more than ", kMaxPrompts, " prompts"));
  }
  for (const Json* item : items) {
    v1::GenerateRequest proto = common;
    if (item->is_string()) {
      proto.set_text(item->get<std::string>());
      out->prompt_texts.push_back(item->get<std::string>());
    } else if (IsTokenList(*item)) {
      if (absl::Status s = SetTokens(*item, &proto); !s.ok()) return s;
      out->prompt_texts.emplace_back();
    } else {
      return absl::InvalidArgumentError(
          "prompt must be a string, a list of strings, a list of token ids or a list of such lists");
    }
    out->prompts.push_back(std::move(proto));
  }
  return absl::OkStatus();
}

absl::Status RequireObject(const Json& body) {
  if (!body.is_object()) return absl::InvalidArgumentError("body must be a JSON object");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseChatRequest(const Json& body) {
  if (absl::Status s = RequireObject(body); !s.ok()) return s;
  Fields f(body);
  OpenAiRequest out;
  out.endpoint = Endpoint::kChat;
  v1::GenerateRequest proto;
  ReadCommon(f, &out, &proto);
  // max_completion_tokens is OpenAI's newer name; it wins over max_tokens.
  ReadStopping(f, f.Get("max_completion_tokens") != nullptr ? "max_completion_tokens" : "max_tokens",
               proto.mutable_stopping());
  if (auto v = f.Bool("logprobs")) out.logprobs = *v;
  if (auto v = f.Int32("top_logprobs")) {
    if (!out.logprobs) f.Fail("top_logprobs", "needs logprobs: true");
    if (*v < 0 || *v > kMaxLogprobs) f.Fail("top_logprobs", absl::StrCat("must be in [0, ", kMaxLogprobs, "], got ", *v));
    out.top_logprobs = *v;
  }
  for (const char* legacy : {"functions", "function_call"}) {
    if (f.Get(legacy) != nullptr) f.Fail(legacy, "is not supported (use tools and tool_choice)");
  }
  if (out.logprobs) proto.set_logprobs(out.top_logprobs);
  if (!f.status().ok()) return f.status();
  if (absl::Status s = ReadChat(f, proto.mutable_chat()); !s.ok()) return s;
  out.prompts.push_back(std::move(proto));
  out.prompt_texts.emplace_back();
  return out;
}

absl::StatusOr<OpenAiRequest> ParseCompletionRequest(const Json& body) {
  if (absl::Status s = RequireObject(body); !s.ok()) return s;
  Fields f(body);
  OpenAiRequest out;
  out.endpoint = Endpoint::kCompletion;
  v1::GenerateRequest proto;
  ReadCommon(f, &out, &proto);
  ReadStopping(f, "max_tokens", proto.mutable_stopping());
  // OpenAI's completions default is 16 tokens.
  if (!proto.stopping().has_max_tokens()) proto.mutable_stopping()->set_max_tokens(16);
  if (auto v = f.Int32("logprobs")) {
    out.logprobs = true;
    out.top_logprobs = *v;
    proto.set_logprobs(*v);
  }
  if (auto v = f.Bool("echo")) out.echo = *v;
  if (const Json* suffix = f.Get("suffix"); suffix != nullptr && *suffix != "") {
    f.Fail("suffix", "is not supported");
  }
  if (!f.status().ok()) return f.status();
  if (absl::Status s = ReadPrompts(f, proto, &out); !s.ok()) return s;
  return out;
}

absl::StatusOr<v1::TokenizeRequest> ParseTokenizeRequest(const Json& body) {
  if (absl::Status s = RequireObject(body); !s.ok()) return s;
  Fields f(body);
  v1::TokenizeRequest out;
  const bool add_special = f.Bool("add_special_tokens").value_or(true);
  if (f.Get("messages") != nullptr) {
    if (absl::Status s = ReadChat(f, out.mutable_chat()); !s.ok()) return s;
  } else if (auto prompt = f.String("prompt")) {
    out.set_text(*prompt);
    out.set_add_bos(add_special);
  } else if (f.status().ok()) {
    return absl::InvalidArgumentError("prompt must be set (or messages)");
  }
  if (!f.status().ok()) return f.status();
  return out;
}

absl::StatusOr<v1::DetokenizeRequest> ParseDetokenizeRequest(const Json& body) {
  if (absl::Status s = RequireObject(body); !s.ok()) return s;
  Fields f(body);
  v1::DetokenizeRequest out;
  const Json* tokens = f.Get("tokens");
  if (tokens == nullptr || !tokens->is_array()) {
    return absl::InvalidArgumentError("ids must be a list of token ids");  // FromStatus names it "tokens"
  }
  for (const Json& id : *tokens) {
    if (!id.is_number_integer() || (id.is_number_unsigned() && id.get<uint64_t>() > uint64_t{INT32_MAX}) ||
        id.get<int64_t>() < INT32_MIN || id.get<int64_t>() > INT32_MAX) {
      return absl::InvalidArgumentError("ids must be a list of token ids");
    }
    out.add_ids(id.get<int32_t>());
  }
  if (auto v = f.Bool("skip_special_tokens")) out.set_skip_special_tokens(*v);
  if (!f.status().ok()) return f.status();
  return out;
}

}  // namespace gemma::server::http
