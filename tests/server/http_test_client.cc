#include "tests/server/http_test_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace gemma::server::testing {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;

HttpReply HttpCall(int port, const std::string& method, const std::string& target,
                   const std::string& body, const Headers& headers) {
  boost::asio::io_context io;
  tcp::socket socket(io);
  HttpReply reply;
  beast::error_code ec;
  socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                               static_cast<unsigned short>(port)), ec);
  if (ec) {
    reply.body = "connect failed: " + ec.message();
    return reply;
  }
  bhttp::request<bhttp::string_body> request(bhttp::string_to_verb(method), target, 11);
  request.set(bhttp::field::host, "127.0.0.1");
  if (!body.empty()) request.set(bhttp::field::content_type, "application/json");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = body;
  request.prepare_payload();
  bhttp::write(socket, request, ec);
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64 << 20);
  if (!ec) bhttp::read(socket, buffer, parser, ec);
  if (ec) {
    reply.body = "read failed: " + ec.message();
    return reply;
  }
  reply.status = parser.get().result_int();
  reply.content_type = std::string(parser.get()[bhttp::field::content_type]);
  reply.body = parser.get().body();
  return reply;
}

std::vector<nlohmann::json> SseEvents(const std::string& body, bool* done) {
  std::vector<nlohmann::json> events;
  *done = false;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find("\n\n", at);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(at, end - at);
    at = end + 2;
    if (event.rfind("data: ", 0) != 0) continue;
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      *done = true;
      break;
    }
    events.push_back(nlohmann::json::parse(data, nullptr, false));
  }
  return events;
}

}  // namespace gemma::server::testing
