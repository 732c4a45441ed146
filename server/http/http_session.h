// One HTTP/1.1 connection (Boost.Beast), plain or TLS: reads requests one at
// a time (keep-alive), hands each to the API as an HttpExchange, and writes
// its reply: a whole response, or a chunked text/event-stream with one write
// in flight (data queued meanwhile is merged into the next write, so a slow
// reader never blocks the engine). A client that closes the connection while
// its request runs is reported through HttpExchange::OnClientGone: at once
// on a plain connection (the socket turns readable with nothing to read), at
// the next write on a TLS one.
//
// Thread-safety: everything runs on the connection's strand.
#pragma once

#include <atomic>

#include <cstddef>
#include <functional>
#include <memory>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http.hpp>

#include "server/http/http_exchange.h"

namespace gemma::server::http {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
// Called on the connection's strand for each request.
using RequestHandler = std::function<void(Request&& request, std::shared_ptr<HttpExchange> exchange)>;

struct SessionOptions {
  size_t max_body_bytes = 4 << 20;  // larger bodies get 413
  int idle_timeout_s = 120;         // between requests, and for reading one
  // Counts the sessions' exchanges between a request and the end of its
  // reply (written, or the connection closed); may be null. The front waits
  // for it to reach 0 before it stops, so no reply is cut off mid-write.
  std::atomic<int>* open_exchanges = nullptr;
};

// `socket` must be on a strand of its own. `handler` and `tls` must outlive
// every session.
void StartPlainSession(boost::asio::ip::tcp::socket socket, const SessionOptions& options,
                       const RequestHandler* handler);
void StartTlsSession(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls,
                     const SessionOptions& options, const RequestHandler* handler);

}  // namespace gemma::server::http
