#include "server/ops/metrics_http.h"

#include <httplib.h>
#include <sys/socket.h>

#include "absl/strings/str_cat.h"

namespace gemma::server::ops {

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::function<std::string()> render) {
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->http_ = std::make_unique<httplib::Server>();
  // httplib's default adds SO_REUSEPORT: a second server would then bind a
  // busy port silently and take part of its scrapes. Only SO_REUSEADDR.
  server->http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server->http_->Get("/metrics", [render](const httplib::Request&, httplib::Response& response) {
    response.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  // An IPv6 literal may come bracketed from --host; httplib wants it bare.
  std::string bind_host = host;
  if (bind_host.size() > 2 && bind_host.front() == '[' && bind_host.back() == ']') {
    bind_host = bind_host.substr(1, bind_host.size() - 2);
  }
  if (port == 0) {
    server->port_ = server->http_->bind_to_any_port(bind_host);
  } else if (server->http_->bind_to_port(bind_host, port)) {
    server->port_ = port;
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("--metrics-port: cannot listen on ", bind_host, ":", port));
  }
  httplib::Server* http = server->http_.get();
  server->thread_ = std::thread([http] { http->listen_after_bind(); });
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (http_ != nullptr) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gemma::server::ops
