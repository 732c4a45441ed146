// OpenAI-style error replies: {"error": {"message", "type", "param", "code"}}
// with the HTTP status, and the mapping from the server's absl::Status (whose
// messages name gemma.v1 proto fields) to OpenAI's request field names.
//
// Thread-safety: plain values and free functions.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gemma::server::http {

struct ApiError {
  int http_status = 500;
  std::string message;
  std::string param;  // the request field at fault; empty: none
  // The JSON body.
  std::string Body() const;
};

ApiError BadRequest(std::string message, std::string param = "");
ApiError NotFound(std::string message);
ApiError Unauthorized(std::string message);

// The HTTP status for a status code (INVALID_ARGUMENT 400, UNAUTHENTICATED
// 401, NOT_FOUND 404, RESOURCE_EXHAUSTED 429, UNAVAILABLE 503, ...).
int HttpStatusOf(absl::StatusCode code);

// `status` as an error reply; proto field paths at the start of its message
// ("sampling.top_p must be ...", "chat.messages[1].content_parts[0].type ...")
// become the OpenAI field ("top_p", "messages[1].content[0].type"), which is
// also `param`.
ApiError FromStatus(const absl::Status& status);

// The OpenAI field name for a gemma.v1 GenerateRequest field path.
std::string OpenAiFieldName(const std::string& proto_path);

}  // namespace gemma::server::http
