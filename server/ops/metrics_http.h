// The /metrics HTTP endpoint (cpp-httplib), on its own port and thread.
//
// Thread-safety: Start and the destructor from one thread; `render` is
// called on the HTTP thread, once per scrape.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace gemma::server::ops {

class MetricsHttpServer {
 public:
  // Listens on host:port (0 = any free port) and serves GET /metrics with
  // `render()`. UNAVAILABLE naming --metrics-port when it cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, std::function<std::string()> render);
  ~MetricsHttpServer();  // stops listening and joins the thread

  int port() const { return port_; }

 private:
  MetricsHttpServer() = default;

  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace gemma::server::ops
