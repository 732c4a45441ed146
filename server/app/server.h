// gemma-serve as an object: binds the gRPC port (health NOT_SERVING), loads
// the model, serves, and drains. main() and the in-process tests use it.
//
// Thread-safety: Start, Load and Drain are called from one controlling
// thread, in that order; port() and engine() from any thread after Load.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "engine/chat/chat_prompt.h"
#include "engine/core/backend_options.h"
#include "engine/core/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/gemma_service.h"
#include "server/http/http_front.h"
#include "server/ops/operations.h"
#include "server/ops/ops_options.h"

namespace gemma::reflection {
class ReflectionV1Service;
}  // namespace gemma::reflection

namespace gemma::server {

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 50051;                   // 0 = any free port (see port())
  // The model, its backend and their sizes, passed to CreateBackend as they
  // are; max_tokens_per_step is also the engine's chunked-prefill budget (0:
  // DefaultMaxTokensPerStep, chosen when the model loads).
  BackendOptions backend;
  int max_queue = 256;
  std::string tokenizer_path;         // empty: the model directory's tokenizer
  std::string chat_template_path;     // empty: the model directory's template
  std::string generation_config = "auto";  // auto | ignore (sampling defaults)
  ops::OpsOptions ops;                // metrics, auth, TLS, limits (all off by default)
  // OpenAI-compatible HTTP API (server/http): -1 off, 0 any free port. A
  // port not required (the flag's default) only warns when busy.
  int http_port = -1;
  bool http_port_required = true;
  std::string served_model_name;      // empty: the model directory's name
  PreparePoolOptions prepare;         // tokenizer threads and their queue (both fronts)
};

// The health service name of the API, besides "" (the whole server).
inline constexpr char kServiceName[] = "gemma.v1.Gemma";

class GemmaServer {
 public:
  // Listens at once; every call answers UNAVAILABLE and health reports
  // NOT_SERVING until Load() succeeds.
  static absl::StatusOr<std::unique_ptr<GemmaServer>> Start(const ServerOptions& options);
  ~GemmaServer();

  // Loads tokenizer, backend and engine, then reports SERVING.
  absl::Status Load();
  // Health NOT_SERVING, new calls UNAVAILABLE; waits up to `grace` for the
  // streams in flight, cancels what is left, and stops the gRPC server.
  void Drain(std::chrono::milliseconds grace);

  int port() const { return port_; }
  std::string address() const;
  Engine* engine() const { return engine_.get(); }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // The /metrics port, -1 when off.
  int metrics_port() const { return ops_ != nullptr ? ops_->metrics_port() : -1; }
  // The OpenAI-compatible API's port, -1 when off.
  int http_port() const { return http_ != nullptr ? http_->port() : -1; }
  // Generate calls registered (queued for preparation, or in the engine).
  int active_calls() { return service_.active_calls().size(); }

 private:
  explicit GemmaServer(const ServerOptions& options);
  void SetHealth(bool serving);
  absl::Status StartHttp();  // the OpenAI-compatible front, when asked
  v1::ModelInfo DescribeModel() const;
  absl::Status LoadChatTemplate();
  GenerationDefaults SamplingDefaults() const;

  ServerOptions options_;
  int port_ = 0;
  GemmaService service_;
  // Declared before server_: destroyed after it, so no call outlives them.
  // ops_ before engine_: the engine's callbacks reach it until it is gone.
  std::unique_ptr<ops::Operations> ops_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> chat_template_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<reflection::ReflectionV1Service> reflection_v1_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<http::HttpFront> http_;  // null when off
  bool drained_ = false;
};

}  // namespace gemma::server
