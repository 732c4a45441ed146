// The OpenAI-compatible HTTP front of gemma-serve, beside gRPC in the same
// process and over the same engine: a Boost.Asio io_context on a small
// thread pool, one strand per connection, asynchronous reads and writes (so
// thousands of idle or streaming connections cost sockets, not threads).
// Same API keys and TLS certificate as gRPC.
//
// Life: Start (binds; every request but /health answers 503) -> Attach
// (serving) -> StartDraining (new requests 503, requests in flight go on) ->
// Stop (closes every connection, joins the threads; the engine must already
// be shut down, so no event is posted afterwards).
//
// Thread-safety: Start/Attach/StartDraining/Stop from the server's
// controlling thread; port() from any thread.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "server/gemma_service.h"
#include "server/http/http_session.h"
#include "server/ops/tls.h"

namespace gemma::server::http {

struct HttpFrontOptions {
  std::string host = "0.0.0.0";
  int port = 8000;                  // 0: any free port
  std::string served_model_name;    // empty: the model directory's name
  int num_threads = 4;
  SessionOptions session;
  std::vector<std::string> api_keys;
  ops::TlsOptions tls;              // cert + key: HTTPS
};

class HttpFront {
 public:
  // UNAVAILABLE naming --http-port when it cannot listen; INVALID_ARGUMENT
  // for an unusable TLS certificate or key.
  static absl::StatusOr<std::unique_ptr<HttpFront>> Start(const HttpFrontOptions& options);
  ~HttpFront();

  // REQUIRES: `service` is attached and outlives this object.
  void Attach(GemmaService* service);
  void StartDraining();
  void Stop();
  int port() const { return port_; }

 private:
  struct Impl;
  explicit HttpFront(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace gemma::server::http
