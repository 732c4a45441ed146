// The operations side of a GemmaServer, behind one object so that the
// server touches it in three places: building the gRPC listener (TLS,
// message size), creating the engine (step hook), and attaching the
// service (the OpsEngine decorator, the token limits, the API keys).
//
// Thread-safety: Create, AddListeningPort, ConfigureEngine and WrapEngine run
// on the server's controlling thread, in that order; the /metrics thread
// renders concurrently (it sees the engine once WrapEngine published it).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/core/engine.h"
#include "server/ops/auth.h"
#include "server/ops/metrics_http.h"
#include "server/ops/ops_engine.h"
#include "server/ops/ops_options.h"
#include "server/ops/server_metrics.h"

namespace gemma::server::ops {

class Operations {
 public:
  // Starts /metrics when asked (`grpc_host` is its default address).
  // UNAVAILABLE when a required metrics port cannot be bound; a busy default
  // port only logs a warning.
  static absl::StatusOr<std::unique_ptr<Operations>> Create(const OpsOptions& options,
                                                            const std::string& grpc_host);
  ~Operations();

  // Adds the gRPC listening port with TLS (or plain-text) credentials, and
  // caps the receive message size.
  absl::Status AddListeningPort(const std::string& address, grpc::ServerBuilder& builder,
                                int* selected_port);
  void ConfigureEngine(EngineOptions* engine_options);
  // The engine the service should use: `engine` behind the OpsEngine
  // (metrics, stream cap, request timeout). REQUIRES: `engine` outlives this.
  Engine* WrapEngine(Engine* engine);

  // Stops /metrics. Called when the server stops (before the engine goes).
  void StopMetrics() { http_.reset(); }

  const RequestLimits& limits() const { return options_.limits; }
  const ApiKeyChecker& auth() const { return auth_; }
  int metrics_port() const { return http_ != nullptr ? http_->port() : -1; }
  ServerMetrics& metrics() { return metrics_; }

 private:
  explicit Operations(const OpsOptions& options) : options_(options), auth_(options.api_keys) {}
  std::string RenderMetrics();

  const OpsOptions options_;
  const ApiKeyChecker auth_;
  ServerMetrics metrics_;
  std::unique_ptr<OpsEngine> ops_engine_;
  std::atomic<OpsEngine*> published_engine_{nullptr};
  // Last: stopped first, so no scrape outlives what it reads.
  std::unique_ptr<MetricsHttpServer> http_;
};

}  // namespace gemma::server::ops
