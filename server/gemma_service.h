// The gemma.v1.Gemma service (gRPC callback API). Converts protos to engine
// requests and back; all generation work is the engine's.
//
// States: loading (every call answers UNAVAILABLE) -> serving -> draining
// (new calls answer UNAVAILABLE, streams in flight go on).
//
// Requests are parsed by the service's own method handlers: a message that does not parse (truncated, garbage, a
// proto3 string that is not UTF-8) answers INVALID_ARGUMENT, where gRPC's
// generated callback handlers would answer UNIMPLEMENTED with no message.
//
// Thread-safety: handlers run on gRPC threads concurrently; the model is
// attached once (Attach) before the state turns to serving, and is immutable
// afterwards.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "engine/core/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "gemma/v1/gemma.grpc.pb.h"
#include "server/active_calls.h"
#include "server/ops/auth.h"
#include "server/ops/limits.h"
#include "server/prepare_pool.h"
#include "server/request_builder.h"
#include "server/submission.h"

namespace gemma::server {

class GemmaService final : public v1::Gemma::CallbackService {
 public:
  GemmaService();

  // REQUIRES: called once, before any other method but the handlers. The
  // engine and tokenizer must outlive every call.
  // `limits`: the operator's token limits (--max-prompt-tokens, ...);
  // `auth`: the API keys every call must carry (null: none), must outlive
  // every call. `serving`: the chat template and sampling defaults (its
  // max_context and vocab_size are taken from `info`); its template must
  // outlive every call. `prepare`: the threads and queue that tokenize
  // Generate and Tokenize requests (and the HTTP front's).
  void Attach(Engine* engine, const Tokenizer* tokenizer, v1::ModelInfo info,
              const ops::RequestLimits& limits = {}, const ops::ApiKeyChecker* auth = nullptr,
              const ServingLimits& serving = {}, const PreparePoolOptions& prepare = {});
  // New calls answer UNAVAILABLE from now on.
  void StartDraining() { state_.store(State::kDraining, std::memory_order_release); }
  ActiveCalls& active_calls() { return calls_; }
  // Lets the preparations on tokenizer threads finish and ends the calls
  // whose preparation still waits for one (UNAVAILABLE / 503); later ones
  // are refused. For a drain whose grace period is over: afterwards no pool
  // task posts to a connection or touches a call.
  void StopPreparing() { if (pool_ != nullptr) pool_->Shutdown(); }

  // Shared with the HTTP front, so that both fronts take one path into the
  // engine and tokenize alike. REQUIRES: after Attach.
  SubmitPath submit_path() {
    return {engine_, tokenizer_, &limits_, &ops_limits_, &calls_, pool_.get()};
  }
  const v1::ModelInfo& model_info() const { return info_; }
  grpc::Status DoTokenize(const v1::TokenizeRequest& request, v1::TokenizeResponse* response) const;
  grpc::Status DoDetokenize(const v1::DetokenizeRequest& request,
                            v1::DetokenizeResponse* response) const;

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* GetServerStatus(grpc::CallbackServerContext* context,
                                            const v1::GetServerStatusRequest* request,
                                            v1::ServerStatus* response) override;

 private:
  enum class State { kLoading, kServing, kDraining };

  // Replaces the generated handler of every method by one that sees parse
  // failures (see the class comment).
  void RegisterParsingHandlers();
  template <typename Request, typename Response>
  using UnaryMethod = grpc::ServerUnaryReactor* (GemmaService::*)(grpc::CallbackServerContext*,
                                                                  const Request*, Response*);
  template <typename Request, typename Response>
  void RegisterUnary(int index, UnaryMethod<Request, Response> method);

  // OK while serving to an authenticated caller; UNAVAILABLE naming the
  // reason, or UNAUTHENTICATED, otherwise.
  grpc::Status CheckServing(const grpc::CallbackServerContext& context) const;
  std::string NewRequestId();

  std::atomic<State> state_{State::kLoading};
  Engine* engine_ = nullptr;
  const Tokenizer* tokenizer_ = nullptr;
  v1::ModelInfo info_;
  ServingLimits limits_;
  ops::RequestLimits ops_limits_;
  const ops::ApiKeyChecker* auth_ = nullptr;
  ActiveCalls calls_;
  const uint32_t id_prefix_;           // tells ids of different server runs apart
  std::atomic<uint64_t> next_id_{1};
  // Last: its destructor finishes the tasks that use the members above.
  std::unique_ptr<PreparePool> pool_;
};

}  // namespace gemma::server
