#include "server/app/server.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "engine/factory/backend_factory.h"
#include "grpc/health/v1/health.pb.h"
#include "grpc/reflection/v1/reflection_v1_service.h"
#include "server/ops/limits.h"
#include "spdlog/spdlog.h"

namespace gemma::server {
namespace {

// Time the reactors get to deliver their final messages after the engine
// has cancelled what outlived the grace period.
constexpr std::chrono::seconds kFinalFlush{2};

// "host:port", with an IPv6 host in brackets ("[::1]:50051").
std::string JoinHostPort(const std::string& host, int port) {
  const bool bare_ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return bare_ipv6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

}  // namespace

GemmaServer::GemmaServer(const ServerOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<GemmaServer>> GemmaServer::Start(const ServerOptions& options) {
  std::unique_ptr<GemmaServer> server(new GemmaServer(options));
  // Links the health descriptors into the binary, so that reflection can
  // describe grpc.health.v1 as well as gemma.v1.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  absl::StatusOr<std::unique_ptr<ops::Operations>> ops =
      ops::Operations::Create(options.ops, options.host);
  if (!ops.ok()) return ops.status();
  server->ops_ = *std::move(ops);
  grpc::ServerBuilder builder;
  // gRPC enables SO_REUSEPORT by default: a second server on a busy port
  // would start silently and share its traffic. Fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  absl::Status listening = server->ops_->AddListeningPort(JoinHostPort(options.host, options.port),
                                                          builder, &server->port_);
  if (!listening.ok()) return listening;
  builder.RegisterService(&server->service_);
  // grpc.reflection.v1 beside the plugin's v1alpha: newer clients ask v1 first.
  server->reflection_v1_ = std::make_unique<reflection::ReflectionV1Service>(
      std::vector<std::string>{kServiceName, "grpc.health.v1.Health",
                               "grpc.reflection.v1.ServerReflection",
                               "grpc.reflection.v1alpha.ServerReflection"});
  builder.RegisterService(server->reflection_v1_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", JoinHostPort(options.host, options.port)));
  }
  // The built-in health service starts out SERVING; say the truth at once.
  server->SetHealth(false);
  if (absl::Status s = server->StartHttp(); !s.ok()) return s;
  return server;
}

absl::Status GemmaServer::StartHttp() {
  if (options_.http_port < 0) return absl::OkStatus();
  http::HttpFrontOptions http_options;
  http_options.host = options_.host;
  http_options.port = options_.http_port;
  http_options.served_model_name = options_.served_model_name;
  http_options.api_keys = options_.ops.api_keys;
  http_options.tls = options_.ops.tls;
  if (options_.ops.max_message_bytes > 0) {
    http_options.session.max_body_bytes = options_.ops.max_message_bytes;
  }
  absl::StatusOr<std::unique_ptr<http::HttpFront>> front = http::HttpFront::Start(http_options);
  if (front.ok()) {
    http_ = *std::move(front);
    return absl::OkStatus();
  }
  if (options_.http_port_required) return front.status();
  spdlog::warn("OpenAI-compatible API off: {} (pass --http-port to choose another port)",
               std::string(front.status().message()));
  return absl::OkStatus();
}

GemmaServer::~GemmaServer() {
  // server_ is null when Start() could not listen.
  if (!drained_ && server_ != nullptr) Drain(std::chrono::milliseconds(0));
}

std::string GemmaServer::address() const { return JoinHostPort(options_.host, port_); }

void GemmaServer::SetHealth(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  health->SetServingStatus(kServiceName, serving);
}

absl::Status GemmaServer::Load() {
  // A directory: tokenizer.json, else tokenizer.model (as transformers).
  const std::string tokenizer_path =
      !options_.tokenizer_path.empty() ? options_.tokenizer_path : options_.backend.model_dir;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Load(tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();
  tokenizer_ = *std::move(tokenizer);
  if (absl::Status s = LoadChatTemplate(); !s.ok()) return s;

  if (options_.backend.max_tokens_per_step == 0) {
    options_.backend.max_tokens_per_step = DefaultMaxTokensPerStep(options_.backend);
    spdlog::info("max tokens per step: {} (the default for this device; --max-tokens-per-step sets it)",
                 options_.backend.max_tokens_per_step);
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(options_.backend);
  if (!backend.ok()) return backend.status();

  EngineOptions engine_options;
  engine_options.max_queue = options_.max_queue;
  engine_options.max_tokens_per_step = options_.backend.max_tokens_per_step;
  ops_->ConfigureEngine(&engine_options);
  ops::ApplyRequestLimits(ops_->limits(), &engine_options);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(engine_options, *std::move(backend), tokenizer_.get());
  if (!engine.ok()) return engine.status();
  engine_ = *std::move(engine);

  ServingLimits serving;
  serving.chat_template = chat_template_.get();
  serving.sampling_defaults = SamplingDefaults();
  service_.Attach(ops_->WrapEngine(engine_.get()), tokenizer_.get(), DescribeModel(),
                  ops_->limits(), &ops_->auth(), serving, options_.prepare);
  if (http_ != nullptr) http_->Attach(&service_);
  SetHealth(true);
  return absl::OkStatus();
}

// --chat-template FILE, else the model directory's template, else the
// built-in Gemma 4 one.
absl::Status GemmaServer::LoadChatTemplate() {
  absl::StatusOr<ChatTemplate> loaded =
      LoadServingChatTemplate(options_.chat_template_path, options_.backend.model_dir);
  if (!loaded.ok()) {
    if (!options_.chat_template_path.empty()) {
      return absl::Status(loaded.status().code(), absl::StrCat("--chat-template: ", loaded.status().message()));
    }
    return loaded.status();
  }
  chat_template_ = std::make_unique<ChatTemplate>(*std::move(loaded));
  spdlog::info("chat template: {}", chat_template_->origin());
  return absl::OkStatus();
}

// What unset sampling fields become: generation_config.json's values unless
// --generation-config ignore.
GenerationDefaults GemmaServer::SamplingDefaults() const {
  if (options_.generation_config == "ignore") return {};
  return engine_->backend().config().generation_defaults;
}

v1::ModelInfo GemmaServer::DescribeModel() const {
  const Backend& backend = engine_->backend();
  const ModelConfig& config = backend.config();
  v1::ModelInfo info;
  info.set_model_name(std::filesystem::path(options_.backend.model_dir).lexically_normal()
                          .filename().string());
  if (info.model_name().empty()) {
    info.set_model_name(std::filesystem::path(options_.backend.model_dir).lexically_normal()
                            .parent_path().filename().string());
  }
  info.set_architecture(config.architecture);
  info.set_context_length(backend.max_context());
  info.set_max_position_embeddings(config.max_position_embeddings);
  info.set_vocab_size(config.vocab_size);
  for (const LayerSpec& layer : config.layers) {
    info.add_layer_types(layer.is_global() ? "global" : "sliding");
  }
  info.set_dtype(config.dtype);
  info.set_backend(backend.name());
  info.set_max_batch(backend.max_slots());
  info.set_num_layers(config.num_layers);
  info.set_hidden_size(config.hidden_size);
  info.set_sliding_window(config.sliding_window);
  info.set_max_queue(options_.max_queue);
  const KvCacheSpec kv = backend.kv_cache_spec();
  info.set_kv_block_size(kv.block_size);
  info.set_kv_num_blocks(kv.block_size > 0 ? kv.num_global_blocks : backend.max_slots());
  info.set_kv_token_capacity(kv.block_size > 0 ? int64_t{kv.num_global_blocks} * kv.block_size
                                               : int64_t{backend.max_slots()} * backend.max_context());
  info.set_kv_cache_bytes(backend.kv_cache_bytes());
  const GenerationDefaults defaults = SamplingDefaults();
  const SamplingParams plain;
  info.set_default_temperature(defaults.temperature.value_or(plain.temperature));
  info.set_default_top_k(defaults.top_k.value_or(plain.top_k));
  info.set_default_top_p(defaults.top_p.value_or(plain.top_p));
  for (int32_t id : config.eos_token_ids) info.add_eos_token_ids(id);
  if (tokenizer_->special().eos >= 0 &&
      std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(),
                tokenizer_->special().eos) == config.eos_token_ids.end()) {
    info.add_eos_token_ids(tokenizer_->special().eos);
  }
  info.set_chat_template(chat_template_->origin());
  return info;
}

void GemmaServer::Drain(std::chrono::milliseconds grace) {
  if (drained_) return;
  drained_ = true;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  SetHealth(false);
  service_.StartDraining();
  if (http_ != nullptr) http_->StartDraining();
  spdlog::info("draining: refusing new calls, waiting for {} stream(s)",
               service_.active_calls().size());
  if (!service_.active_calls().WaitUntilEmpty(deadline)) {
    spdlog::warn("draining: grace period over, cancelling {} stream(s)",
                 service_.active_calls().size());
  }
  service_.StopPreparing();
  // Cancels what is left (their streams end with FINISH_REASON_CANCELLED).
  if (engine_ != nullptr) engine_->Shutdown(std::chrono::milliseconds(0));
  service_.active_calls().WaitUntilEmpty(std::chrono::steady_clock::now() + kFinalFlush);
  // The engine has stopped: no event is posted to a connection any more.
  if (http_ != nullptr) http_->Stop();
  // Ends health watches and anything still open.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  ops_->StopMetrics();
}

}  // namespace gemma::server
