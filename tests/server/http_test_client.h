// A blocking HTTP/1.1 client for the OpenAI front's tests (Boost.Beast):
// one connection per call, chunked replies decoded, SSE bodies split.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace gemma::server::testing {

struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string body;
  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

HttpReply HttpCall(int port, const std::string& method, const std::string& target,
                   const std::string& body = "", const Headers& headers = {});
inline HttpReply Post(int port, const std::string& target, const nlohmann::json& body,
                      const Headers& headers = {}) {
  return HttpCall(port, "POST", target, body.dump(), headers);
}

// The JSON of each "data: " event before "data: [DONE]"; `done` tells
// whether [DONE] came.
std::vector<nlohmann::json> SseEvents(const std::string& body, bool* done);

}  // namespace gemma::server::testing
