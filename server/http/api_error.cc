#include "server/http/api_error.h"

#include <string_view>
#include <utility>

#include "nlohmann/json.hpp"

namespace gemma::server::http {
namespace {

// Proto field prefixes and their OpenAI names, longest first where one
// prefix extends another.
constexpr std::pair<std::string_view, std::string_view> kFieldNames[] = {
    {"chat.messages", "messages"},
    {"chat.tools", "tools"},
    {"chat.template_kwargs", "chat_template_kwargs"},
    {"chat.add_generation_prompt", "add_generation_prompt"},
    {"chat", "messages"},
    {"sampling.", ""},
    {"stopping.stop_token_ids", "stop_token_ids"},
    {"stopping.stop", "stop"},
    {"stopping.", ""},
    {"tokens.ids", "prompt"},
    {"tokens", "prompt"},
    {"text", "prompt"},
    {"logprobs", "logprobs"},
    {"ids", "tokens"},
};

const char* TypeOf(int http_status) {
  switch (http_status) {
    case 400: return "BadRequestError";
    case 401: return "AuthenticationError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowedError";
    case 413: return "RequestTooLargeError";
    case 429: return "RateLimitError";
    case 431: return "RequestHeaderFieldsTooLargeError";
    case 503: return "ServiceUnavailableError";
    case 504: return "TimeoutError";
    default: return "InternalServerError";
  }
}

// Request fields an error message may start with (also after translation).
constexpr std::string_view kRequestFields[] = {
    "model", "messages", "prompt", "tools", "tool_choice", "n", "stream", "stream_options",
    "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "seed", "stop",
    "stop_token_ids", "ignore_eos", "min_tokens", "logprobs", "top_logprobs", "echo",
    "skip_special_tokens", "chat_template_kwargs", "add_generation_prompt", "priority",
    "tokens", "response_format", "body", "logit_bias", "best_of", "suffix", "parallel_tool_calls", "user",
    "functions", "function_call", "add_special_tokens", "return_token_strs"};

bool IsRequestField(std::string_view path) {
  const std::string_view head = path.substr(0, path.find_first_of(".["));
  for (std::string_view field : kRequestFields) {
    if (head == field) return true;
  }
  return false;
}

bool IsFieldChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '[' ||
         c == ']';
}

}  // namespace

std::string ApiError::Body() const {
  nlohmann::json error = {{"message", message},
                          {"type", TypeOf(http_status)},
                          {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
                          {"code", http_status}};
  return nlohmann::json{{"error", std::move(error)}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError BadRequest(std::string message, std::string param) {
  return ApiError{400, std::move(message), std::move(param)};
}
ApiError NotFound(std::string message) { return ApiError{404, std::move(message), ""}; }
ApiError Unauthorized(std::string message) { return ApiError{401, std::move(message), ""}; }

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists: return 409;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    case absl::StatusCode::kUnimplemented: return 501;
    default: return 500;
  }
}

std::string OpenAiFieldName(const std::string& proto_path) {
  for (const auto& [proto, openai] : kFieldNames) {
    if (proto_path.compare(0, proto.size(), proto) != 0) continue;
    std::string rest = proto_path.substr(proto.size());
    if (!rest.empty() && rest[0] == '.' && openai.empty()) rest.erase(0, 1);
    std::string name = std::string(openai) + rest;
    // content_parts is OpenAI's content list.
    for (size_t at; (at = name.find(".content_parts")) != std::string::npos;) {
      name.replace(at, 14, ".content");
    }
    return name;
  }
  return proto_path;
}

ApiError FromStatus(const absl::Status& status) {
  ApiError error{HttpStatusOf(status.code()), std::string(status.message()), ""};
  if (status.code() != absl::StatusCode::kInvalidArgument) return error;
  size_t end = 0;
  while (end < error.message.size() && IsFieldChar(error.message[end])) ++end;
  if (end == 0 || end == error.message.size() || error.message[end] != ' ') return error;
  const std::string path = error.message.substr(0, end);
  const std::string field = OpenAiFieldName(path);
  if (!IsRequestField(field)) return error;
  error.param = field;
  error.message = field + error.message.substr(end);
  return error;
}

}  // namespace gemma::server::http
