// The OpenAI-compatible HTTP API (vLLM's endpoints and semantics) over the
// gRPC service's model: routes each request, checks the API key and the
// serving state, and answers /health, /v1/models, /tokenize, /detokenize;
// completions go to a GenerationCall.
//
//   GET  /health                 200 serving, 503 loading or draining (no key needed)
//   GET  /v1/models[/{id}]
//   POST /v1/chat/completions    POST /v1/completions
//   POST /tokenize               POST /detokenize
//
// Thread-safety: Handle runs on connection strands concurrently; Attach
// publishes the service once (before the state turns to serving).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/gemma_service.h"
#include "server/http/api_error.h"
#include "server/http/http_session.h"
#include "server/http/openai_request.h"

namespace gemma::server::http {

class OpenAiApi {
 public:
  // `api_keys` empty: no authentication. `served_model_name` empty: the
  // model directory's name.
  OpenAiApi(std::vector<std::string> api_keys, std::string served_model_name);

  // REQUIRES: once; `service` is attached and outlives every request.
  void Attach(GemmaService* service);
  void StartDraining() { state_.store(State::kDraining, std::memory_order_release); }

  void Handle(Request&& request, std::shared_ptr<HttpExchange> exchange);

 private:
  enum class State { kLoading, kServing, kDraining };

  // The error a request gets before routing (auth, state), if any.
  std::optional<ApiError> CheckAccess(const Request& request) const;
  void Route(const std::string& path, Request& request, HttpExchange& exchange,
             std::shared_ptr<HttpExchange> owner);
  void Models(const std::string& path, HttpExchange& exchange) const;
  void Generate(Endpoint endpoint, const nlohmann::json& body, std::shared_ptr<HttpExchange> exchange);
  // Tokenizes on the service's PreparePool and answers on the strand.
  void Tokenize(const nlohmann::json& body, std::shared_ptr<HttpExchange> exchange) const;
  void Detokenize(const nlohmann::json& body, HttpExchange& exchange) const;
  std::optional<ApiError> CheckModel(const nlohmann::json& body) const;
  // Fills prompt_texts of token prompts for echo.
  absl::Status DecodeEchoPrompts(OpenAiRequest* request) const;
  std::string NewId(const char* prefix);

  const std::vector<std::string> api_keys_;
  std::string model_name_;
  std::atomic<State> state_{State::kLoading};
  GemmaService* service_ = nullptr;
  const uint32_t id_prefix_;
  std::atomic<uint64_t> next_id_{1};
  int64_t created_ = 0;  // /v1/models' "created": when the model was attached
};

// True when `authorization` is "Bearer <key>" (scheme case-insensitive) for
// one of `keys`; compares in time independent of where keys differ.
bool IsAuthorized(std::string_view authorization, const std::vector<std::string>& keys);

}  // namespace gemma::server::http
