#include "server/http/openai_api.h"

#include <ctime>
#include <random>
#include <utility>

#include <boost/asio/post.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/chat/json_depth.h"
#include "server/http/generation_call.h"
#include "server/ops/auth.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"

namespace gemma::server::http {
namespace {

using Json = nlohmann::json;
namespace bhttp = boost::beast::http;

constexpr char kJson[] = "application/json";

void Reply(HttpExchange& exchange, const ApiError& error) {
  exchange.Respond(error.http_status, kJson, error.Body());
}

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace

bool IsAuthorized(std::string_view authorization, const std::vector<std::string>& keys) {
  // HTTP field values may end in whitespace the parser kept.
  while (!authorization.empty() && absl::ascii_isspace(static_cast<unsigned char>(authorization.back()))) {
    authorization.remove_suffix(1);
  }
  return ops::IsAuthorizedBearer(authorization, keys);
}

OpenAiApi::OpenAiApi(std::vector<std::string> api_keys, std::string served_model_name)
    : api_keys_(std::move(api_keys)),
      model_name_(std::move(served_model_name)),
      id_prefix_(std::random_device{}()) {}

void OpenAiApi::Attach(GemmaService* service) {
  service_ = service;
  if (model_name_.empty()) model_name_ = service->model_info().model_name();
  created_ = std::time(nullptr);
  state_.store(State::kServing, std::memory_order_release);
}

std::string OpenAiApi::NewId(const char* prefix) {
  return absl::StrFormat("%s-%08x%08x", prefix, id_prefix_,
                         next_id_.fetch_add(1, std::memory_order_relaxed));
}

std::optional<ApiError> OpenAiApi::CheckAccess(const Request& request) const {
  if (!api_keys_.empty()) {
    const auto it = request.find(bhttp::field::authorization);
    if (it == request.end()) return Unauthorized("missing 'Authorization: Bearer <key>' header");
    if (!IsAuthorized(std::string_view(it->value().data(), it->value().size()), api_keys_)) {
      return Unauthorized("unknown API key");
    }
  }
  switch (state_.load(std::memory_order_acquire)) {
    case State::kServing: return std::nullopt;
    case State::kLoading: return ApiError{503, "the model is still loading", ""};
    case State::kDraining: break;
  }
  return ApiError{503, "the server is shutting down", ""};
}

void OpenAiApi::Handle(Request&& request, std::shared_ptr<HttpExchange> exchange) {
  const std::string target(request.target());
  const std::string path = target.substr(0, target.find('?'));
  if (path == "/health") {
    const State state = state_.load(std::memory_order_acquire);
    if (state == State::kServing) return exchange->Respond(200, kJson, "");
    return Reply(*exchange, ApiError{503, state == State::kLoading ? "the model is still loading"
                                                                   : "the server is shutting down", ""});
  }
  if (std::optional<ApiError> refused = CheckAccess(request)) return Reply(*exchange, *refused);
  HttpExchange& ref = *exchange;
  try {
    Route(path, request, ref, std::move(exchange));
  } catch (const nlohmann::json::exception& e) {
    // A field of an unexpected JSON type deep inside the body.
    Reply(ref, BadRequest(absl::StrCat("the body has a field of the wrong type: ", e.what()), "body"));
  }
}

void OpenAiApi::Route(const std::string& path, Request& request, HttpExchange& exchange,
                      std::shared_ptr<HttpExchange> owner) {
  const bool is_get = request.method() == bhttp::verb::get;
  const bool is_post = request.method() == bhttp::verb::post;
  if (path == "/v1/models" || absl::StartsWith(path, "/v1/models/")) {
    if (!is_get) return Reply(exchange, ApiError{405, "use GET " + path, ""});
    return Models(path, exchange);
  }
  const bool known = path == "/v1/chat/completions" || path == "/v1/completions" ||
                     path == "/tokenize" || path == "/detokenize";
  if (!known) return Reply(exchange, NotFound("no route for " + path));
  if (!is_post) return Reply(exchange, ApiError{405, "use POST " + path, ""});
  const Json body = Json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return Reply(exchange, BadRequest("the body is not valid JSON", "body"));
  if (std::optional<std::string> deep = JsonTooDeep(body)) {  // before anything walks it recursively
    return Reply(exchange, BadRequest(absl::StrCat(*deep, " nests deeper than ", kMaxJsonDepth, " levels"),
                                      body.is_object() ? *deep : "body"));
  }
  if (std::optional<ApiError> error = CheckModel(body)) return Reply(exchange, *error);
  if (path == "/v1/chat/completions") return Generate(Endpoint::kChat, body, std::move(owner));
  if (path == "/v1/completions") return Generate(Endpoint::kCompletion, body, std::move(owner));
  if (path == "/tokenize") return Tokenize(body, std::move(owner));
  Detokenize(body, exchange);
}

std::optional<ApiError> OpenAiApi::CheckModel(const Json& body) const {
  if (!body.is_object()) return std::nullopt;
  const auto it = body.find("model");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return BadRequest("model must be a string", "model");
  if (it->get<std::string>() == model_name_) return std::nullopt;
  ApiError error = NotFound(absl::StrCat("The model `", it->get<std::string>(), "` does not exist."));
  error.param = "model";
  return error;
}

void OpenAiApi::Models(const std::string& path, HttpExchange& exchange) const {
  const v1::ModelInfo& info = service_->model_info();
  const Json model = {{"id", model_name_},
                      {"object", "model"},
                      {"created", created_},
                      {"owned_by", "gemma-serve"},
                      {"root", info.model_name()},
                      {"parent", nullptr},
                      {"max_model_len", info.context_length()}};
  if (path == "/v1/models") {
    return exchange.Respond(200, kJson, DumpJson({{"object", "list"}, {"data", Json::array({model})}}));
  }
  const std::string id = path.substr(std::string("/v1/models/").size());
  if (id != model_name_) {
    return Reply(exchange, NotFound(absl::StrCat("The model `", id, "` does not exist.")));
  }
  exchange.Respond(200, kJson, DumpJson(model));
}

absl::Status OpenAiApi::DecodeEchoPrompts(OpenAiRequest* request) const {
  for (size_t i = 0; i < request->prompts.size(); ++i) {
    const v1::GenerateRequest& prompt = request->prompts[i];
    if (!prompt.has_tokens()) continue;
    v1::DetokenizeRequest detokenize;
    *detokenize.mutable_ids() = prompt.tokens().ids();
    detokenize.set_skip_special_tokens(false);
    v1::DetokenizeResponse text;
    if (grpc::Status s = service_->DoDetokenize(detokenize, &text); !s.ok()) return ToAbsl(s);
    request->prompt_texts[i] = text.text();
  }
  return absl::OkStatus();
}

void OpenAiApi::Generate(Endpoint endpoint, const Json& body, std::shared_ptr<HttpExchange> exchange) {
  absl::StatusOr<OpenAiRequest> request =
      endpoint == Endpoint::kChat ? ParseChatRequest(body) : ParseCompletionRequest(body);
  if (request.ok() && request->echo) {
    if (absl::Status s = DecodeEchoPrompts(&*request); !s.ok()) request = s;
  }
  if (!request.ok()) return Reply(*exchange, FromStatus(request.status()));
  ResponseHeader header;
  header.endpoint = endpoint;
  header.id = NewId(endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl");
  header.created = std::time(nullptr);
  header.model = model_name_;
  header.logprobs = request->logprobs;
  header.parallel_tool_calls = request->parallel_tool_calls;
  header.tokenizer = service_->submit_path().tokenizer;
  GenerationCall::Start(service_->submit_path(), std::move(header), *std::move(request),
                        std::move(exchange));
}

void OpenAiApi::Tokenize(const Json& body, std::shared_ptr<HttpExchange> exchange) const {
  absl::StatusOr<v1::TokenizeRequest> request = ParseTokenizeRequest(body);
  if (!request.ok()) return Reply(*exchange, FromStatus(request.status()));
  const auto strs_field = body.find("return_token_strs");
  if (strs_field != body.end() && !strs_field->is_null() && !strs_field->is_boolean()) {
    return Reply(*exchange, BadRequest("return_token_strs must be true or false", "return_token_strs"));
  }
  const bool strs = strs_field != body.end() && *strs_field == true;
  // A large text or chat takes seconds to tokenize: never on the strand.
  const size_t request_bytes = request->ByteSizeLong();
  auto reply = [exchange](int status, std::string out) {
    boost::asio::post(exchange->executor(), [exchange, status, out = std::move(out)]() mutable {
      exchange->Respond(status, kJson, std::move(out));
    });
  };
  // The service (which owns the pool) outlives the task; this API may not.
  auto task = [service = service_, request = *std::move(request),
               strs, reply](bool run) {
    if (!run) {
      const ApiError error = FromStatus(absl::UnavailableError("the server is shutting down"));
      return reply(error.http_status, error.Body());
    }
    v1::TokenizeResponse response;
    if (grpc::Status s = service->DoTokenize(request, &response); !s.ok()) {
      const ApiError error = FromStatus(ToAbsl(s));
      return reply(error.http_status, error.Body());
    }
    Json out = {{"count", response.ids_size()},
                {"max_model_len", service->model_info().context_length()},
                {"tokens",
                 Json(std::vector<int32_t>(response.ids().begin(), response.ids().end()))},
                {"token_strs", nullptr}};
    if (strs) {
      out["token_strs"] =
          Json(std::vector<std::string>(response.pieces().begin(), response.pieces().end()));
    }
    reply(200, DumpJson(out));
  };
  absl::Status queued = service_->submit_path().pool->Post(request_bytes, std::move(task));
  if (!queued.ok()) Reply(*exchange, FromStatus(queued));
}

void OpenAiApi::Detokenize(const Json& body, HttpExchange& exchange) const {
  absl::StatusOr<v1::DetokenizeRequest> request = ParseDetokenizeRequest(body);
  if (!request.ok()) return Reply(exchange, FromStatus(request.status()));
  v1::DetokenizeResponse response;
  if (grpc::Status s = service_->DoDetokenize(*request, &response); !s.ok()) {
    return Reply(exchange, FromStatus(ToAbsl(s)));
  }
  exchange.Respond(200, kJson, DumpJson({{"prompt", response.text()}}));
}

}  // namespace gemma::server::http
