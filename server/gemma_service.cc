#include "server/gemma_service.h"

#include <random>
#include <utility>

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/generate_reactor.h"
#include "server/ops/server_status.h"
#include "server/status_mapping.h"
#include "spdlog/spdlog.h"

namespace gemma::server {

// A request as the service's handlers receive it: the message, and whether
// its bytes parsed. gRPC 1.51's callback handlers answer a message that fails
// to deserialize with UNIMPLEMENTED and an empty message before any service
// code runs; deserializing into this wrapper always succeeds, so the handler
// can answer INVALID_ARGUMENT instead.
template <typename Message>
struct ParsedRequest {
  Message message;
  bool parsed = false;
};

}  // namespace gemma::server

template <typename Message>
class grpc::SerializationTraits<gemma::server::ParsedRequest<Message>, void> {
 public:
  static grpc::Status Deserialize(grpc::ByteBuffer* buffer,
                                  gemma::server::ParsedRequest<Message>* request) {
    request->parsed =
        grpc::GenericDeserialize<grpc::ProtoBufferReader, Message>(buffer, &request->message).ok();
    return grpc::Status::OK;
  }
};

namespace gemma::server {
namespace {

constexpr size_t kMaxRequestIdBytes = 128;

// The generated code's method indices (the order of gemma.proto's rpcs).
enum MethodIndex { kGenerate, kTokenize, kDetokenize, kGetModelInfo, kGetServerStatus };

grpc::Status Unparsable() {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "the request could not be parsed: malformed protobuf, or a string field "
                      "that is not valid UTF-8");
}

grpc::Status InvalidArgument(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

// A stream refused before reaching the engine: finishes at once with
// `status`, and logs the request's one line.
class FailedStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  FailedStream(const std::string& request_id, const grpc::Status& status) {
    spdlog::info("request {} rejected: {}: {}", request_id.empty() ? "-" : request_id,
                 absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())),
                 status.error_message());
    Finish(status);
  }
  void OnDone() override { delete this; }
};

}  // namespace

GemmaService::GemmaService() : id_prefix_(std::random_device{}()) { RegisterParsingHandlers(); }

void GemmaService::RegisterParsingHandlers() {
  using Stream = grpc::ServerWriteReactor<v1::GenerateResponse>;
  MarkMethodCallback(
      kGenerate,
      new grpc::internal::CallbackServerStreamingHandler<ParsedRequest<v1::GenerateRequest>,
                                                         v1::GenerateResponse>(
          [this](grpc::CallbackServerContext* context,
                 const ParsedRequest<v1::GenerateRequest>* request) -> Stream* {
            if (request->parsed) return Generate(context, &request->message);
            grpc::Status status = CheckServing(*context);
            return new FailedStream("-", status.ok() ? Unparsable() : status);
          }));
  RegisterUnary(kTokenize, &GemmaService::Tokenize);
  RegisterUnary(kDetokenize, &GemmaService::Detokenize);
  RegisterUnary(kGetModelInfo, &GemmaService::GetModelInfo);
  RegisterUnary(kGetServerStatus, &GemmaService::GetServerStatus);
}

template <typename Request, typename Response>
void GemmaService::RegisterUnary(int index, UnaryMethod<Request, Response> method) {
  MarkMethodCallback(
      index, new grpc::internal::CallbackUnaryHandler<ParsedRequest<Request>, Response>(
                 [this, method](grpc::CallbackServerContext* context,
                                const ParsedRequest<Request>* request, Response* response) {
                   if (request->parsed) return (this->*method)(context, &request->message, response);
                   grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
                   grpc::Status status = CheckServing(*context);
                   reactor->Finish(status.ok() ? Unparsable() : status);
                   return reactor;
                 }));
}

void GemmaService::Attach(Engine* engine, const Tokenizer* tokenizer, v1::ModelInfo info,
                          const ops::RequestLimits& limits, const ops::ApiKeyChecker* auth,
                          const ServingLimits& serving, const PreparePoolOptions& prepare) {
  pool_ = std::make_unique<PreparePool>(prepare);
  engine_ = engine;
  ops_limits_ = limits;
  auth_ = auth;
  tokenizer_ = tokenizer;
  limits_ = serving;
  limits_.max_context = info.context_length();
  limits_.vocab_size = info.vocab_size();
  limits_.max_queue = static_cast<int>(info.max_queue());
  info_ = std::move(info);
  state_.store(State::kServing, std::memory_order_release);
}

grpc::Status GemmaService::CheckServing(const grpc::CallbackServerContext& context) const {
  switch (state_.load(std::memory_order_acquire)) {
    // The keys come with Attach: checked once serving (until then every
    // call is refused anyway).
    case State::kServing: return auth_ != nullptr ? auth_->Check(context) : grpc::Status::OK;
    case State::kLoading:
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is still loading");
    case State::kDraining: break;
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
}

std::string GemmaService::NewRequestId() {
  return absl::StrFormat("req-%08x-%d", id_prefix_,
                         next_id_.fetch_add(1, std::memory_order_relaxed));
}

grpc::ServerWriteReactor<v1::GenerateResponse>* GemmaService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  if (grpc::Status status = CheckServing(*context); !status.ok()) {
    return new FailedStream(request->request_id(), status);
  }
  if (request->request_id().size() > kMaxRequestIdBytes) {
    return new FailedStream("-", InvalidArgument(absl::StrCat(
        "request_id is ", request->request_id().size(), " bytes; at most ", kMaxRequestIdBytes)));
  }
  // Ids are written into log lines: no control characters (a newline would forge a line).
  for (size_t i = 0; i < request->request_id().size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(request->request_id()[i]);
    if (c < 0x20 || c == 0x7f) {
      return new FailedStream("-", InvalidArgument(absl::StrCat("request_id holds control character ",
                                                                static_cast<int>(c), " at byte ", i)));
    }
  }
  std::string id = request->request_id().empty() ? NewRequestId() : request->request_id();
  // Registered before it is queued: a drain waits for queued calls too.
  if (absl::Status s = RegisterCall(submit_path(), id); !s.ok()) {
    return new FailedStream(id, ToGrpcStatus(s));
  }
  return GenerateReactor::Start(submit_path(), request, std::move(id));
}

grpc::ServerUnaryReactor* GemmaService::Tokenize(grpc::CallbackServerContext* context,
                                                 const v1::TokenizeRequest* request,
                                                 v1::TokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status status = CheckServing(*context); !status.ok()) {
    reactor->Finish(status);
    return reactor;
  }
  // Tokenizing a large text or chat takes seconds: on the pool, like
  // Generate's. gRPC keeps request and response until the reactor finishes.
  const size_t bytes = request->ByteSizeLong();
  absl::Status queued = pool_->Post(bytes, [this, context, request, response, reactor](bool run) {
    if (!run) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
    } else if (context->IsCancelled()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
    } else {
      reactor->Finish(DoTokenize(*request, response));
    }
  });
  if (!queued.ok()) reactor->Finish(ToGrpcStatus(queued));
  return reactor;
}

grpc::ServerUnaryReactor* GemmaService::Detokenize(grpc::CallbackServerContext* context,
                                                   const v1::DetokenizeRequest* request,
                                                   v1::DetokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = CheckServing(*context);
  reactor->Finish(status.ok() ? DoDetokenize(*request, response) : status);
  return reactor;
}

grpc::ServerUnaryReactor* GemmaService::GetModelInfo(grpc::CallbackServerContext* context,
                                                     const v1::GetModelInfoRequest* /*request*/,
                                                     v1::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = CheckServing(*context);
  if (status.ok()) *response = info_;
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* GemmaService::GetServerStatus(
    grpc::CallbackServerContext* context, const v1::GetServerStatusRequest* /*request*/,
    v1::ServerStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = CheckServing(*context);
  if (status.ok()) ops::FillServerStatus(engine_->Stats(), response);
  reactor->Finish(status);
  return reactor;
}

grpc::Status GemmaService::DoTokenize(const v1::TokenizeRequest& request,
                                      v1::TokenizeResponse* response) const {
  absl::StatusOr<std::vector<int32_t>> ids;
  switch (request.input_case()) {
    case v1::TokenizeRequest::kText:
      if (!IsValidUtf8(request.text())) return InvalidArgument("text is not valid UTF-8");
      ids = request.add_bos() ? tokenizer_->EncodePrompt(request.text())
                              : tokenizer_->Encode(request.text());
      break;
    case v1::TokenizeRequest::kChat:
      ids = RenderChatMessages(request.chat(), *tokenizer_, limits_.chat_template, "chat");
      break;
    default:
      return InvalidArgument("input must be set: one of text or chat");
  }
  TrimAfterLargePrompt(request.ByteSizeLong());
  if (!ids.ok()) return ToGrpcStatus(ids.status());
  for (int32_t id : *ids) {
    response->add_ids(id);
    response->add_pieces(tokenizer_->IdToPiece(id));
  }
  return grpc::Status::OK;
}

grpc::Status GemmaService::DoDetokenize(const v1::DetokenizeRequest& request,
                                        v1::DetokenizeResponse* response) const {
  if (absl::Status s = ValidateTokenIds(request.ids(), limits_.vocab_size, "ids"); !s.ok()) {
    return ToGrpcStatus(s);
  }
  // Decoding never yields a broken character (a cut-off one becomes U+FFFD),
  // so the reply is always a valid proto3 string.
  const std::vector<int32_t> ids(request.ids().begin(), request.ids().end());
  response->set_text(tokenizer_->Decode(
      ids, !request.has_skip_special_tokens() || request.skip_special_tokens()));
  return grpc::Status::OK;
}

}  // namespace gemma::server
