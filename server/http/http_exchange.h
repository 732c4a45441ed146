// One HTTP request's reply, as the API code sees it: a whole response, or a
// Server-Sent Events stream. Implemented by the connection (http_session).
//
// Thread-safety: every method must be called on executor() (the connection's
// strand); the API posts engine events there and never blocks it.
#pragma once

#include <functional>
#include <string>

#include <boost/asio/any_io_executor.hpp>

namespace gemma::server::http {

class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  virtual boost::asio::any_io_executor executor() = 0;
  // The whole reply; ends the exchange.
  virtual void Respond(int status, std::string content_type, std::string body) = 0;
  // Starts a 200 text/event-stream reply; then Send any number of times and
  // End once. Sent data is queued (one write in flight; queued data merges).
  virtual void StartEvents() = 0;
  virtual void SendEvent(std::string data) = 0;
  virtual void EndEvents() = 0;
  // Called (on the strand) when the client goes away before the reply
  // ended: its work should be cancelled. At most once.
  virtual void OnClientGone(std::function<void()> callback) = 0;
};

}  // namespace gemma::server::http
