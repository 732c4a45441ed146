#include "server/ops/operations.h"

#include "server/ops/auth.h"
#include "server/ops/tls.h"
#include "spdlog/spdlog.h"

namespace gemma::server::ops {

absl::StatusOr<std::unique_ptr<Operations>> Operations::Create(const OpsOptions& options,
                                                               const std::string& grpc_host) {
  std::unique_ptr<Operations> ops(new Operations(options));
  if (options.metrics_port < 0) return ops;
  const std::string host = options.metrics_host.empty() ? grpc_host : options.metrics_host;
  Operations* self = ops.get();
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http = MetricsHttpServer::Start(
      host, options.metrics_port, [self] { return self->RenderMetrics(); });
  if (!http.ok()) {
    if (options.metrics_port_required) return http.status();
    spdlog::warn("metrics endpoint off: {} (pass --metrics-port to choose another port)",
                 std::string(http.status().message()));
    return ops;
  }
  ops->http_ = *std::move(http);
  spdlog::info("metrics on http://{}:{}/metrics", host, ops->http_->port());
  return ops;
}

Operations::~Operations() { StopMetrics(); }

absl::Status Operations::AddListeningPort(const std::string& address, grpc::ServerBuilder& builder,
                                          int* selected_port) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials(options_.tls);
  if (!credentials.ok()) return credentials.status();
  builder.AddListeningPort(address, *credentials, selected_port);
  if (options_.max_message_bytes > 0) builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  return absl::OkStatus();
}

void Operations::ConfigureEngine(EngineOptions* engine_options) {
  engine_options->on_step = [this](int batch_size) { metrics_.OnStep(batch_size); };
}

Engine* Operations::WrapEngine(Engine* engine) {
  OpsEngineOptions engine_ops;
  engine_ops.max_concurrent_streams = options_.max_concurrent_streams;
  engine_ops.request_timeout_s = options_.request_timeout_s;
  ops_engine_ = std::make_unique<OpsEngine>(engine, &metrics_, engine_ops);
  published_engine_.store(ops_engine_.get(), std::memory_order_release);
  return ops_engine_.get();
}

std::string Operations::RenderMetrics() {
  const OpsEngine* engine = published_engine_.load(std::memory_order_acquire);
  if (engine == nullptr) return metrics_.Render(EngineStats{}, std::nullopt);
  return metrics_.Render(engine->Stats(), engine->backend().device_memory_used_bytes());
}

}  // namespace gemma::server::ops
