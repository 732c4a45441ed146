#include "server/generate_reactor.h"

#include <utility>

#include "server/response_builder.h"
#include "server/status_mapping.h"
#include "spdlog/spdlog.h"

namespace gemma::server {

// Shared by the reactor and the engine's callback; `reactor` is null once the
// call is done.
struct GenerateReactor::Link {
  std::mutex mu;
  GenerateReactor* reactor = nullptr;
};

GenerateReactor::GenerateReactor(Engine* engine, ActiveCalls* calls, std::string request_id,
                                 int prompt_tokens)
    : engine_(engine),
      calls_(calls),
      request_id_(std::move(request_id)),
      prompt_tokens_(prompt_tokens),
      started_at_(std::chrono::steady_clock::now()),
      link_(std::make_shared<Link>()) {
  link_->reactor = this;
}

GenerateReactor* GenerateReactor::Start(Engine* engine, ActiveCalls* calls,
                                        GenerationRequest request) {
  auto* reactor = new GenerateReactor(engine, calls, request.request_id,
                                      static_cast<int>(request.prompt_ids.size()));
  std::shared_ptr<Link> link = reactor->link_;
  absl::Status submitted = engine->Submit(std::move(request), [link](GenerationEvent&& event) {
    std::lock_guard<std::mutex> lock(link->mu);
    if (link->reactor != nullptr) link->reactor->OnEvent(std::move(event));
  });
  if (!submitted.ok()) {
    {
      std::lock_guard<std::mutex> lock(reactor->mu_);
      reactor->final_seen_ = true;
      reactor->final_status_ = ToGrpcStatus(submitted);
    }
    reactor->Pump();
  }
  return reactor;
}

void GenerateReactor::OnEvent(GenerationEvent&& event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_called_) return;
    if (event.finished) final_seen_ = true;
    if (event.finished && !event.error.ok()) {
      // Tokens before the error still go out; the status, not a finish
      // message, ends the call.
      final_status_ = ToGrpcStatus(event.error);
      event.finished = false;
    }
    AppendEvent(event, &pending_);
    num_output_tokens_ += static_cast<int>(event.token_ids.size());
    has_pending_ = has_pending_ || event.finished || !event.token_ids.empty() ||
                   !event.text_delta.empty() || !event.reasoning_delta.empty() ||
                   !event.tool_calls.empty();
    if (final_seen_) summary_ = std::move(event);
  }
  Pump();
}

void GenerateReactor::OnWriteDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) cancelled_ = true;  // the stream is broken: nothing more can be written
  }
  if (!ok) engine_->Cancel(request_id_);
  Pump();
}

void GenerateReactor::OnCancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  // The engine stops the sequence and frees its KV within one step.
  engine_->Cancel(request_id_);
  Pump();
}

void GenerateReactor::OnDone() {
  {
    std::lock_guard<std::mutex> lock(link_->mu);
    link_->reactor = nullptr;
  }
  // Covers a call that ended without OnCancel (e.g. a failed write); unknown
  // or finished ids are ignored by the engine.
  if (!final_seen_) engine_->Cancel(request_id_);
  LogSummary();
  calls_->Remove(request_id_);
  delete this;
}

GenerateReactor::Action GenerateReactor::NextActionLocked() {
  if (finish_called_ || writing_) return Action::kNone;
  if (cancelled_) {
    finish_called_ = true;
    final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
    return Action::kFinish;
  }
  if (has_pending_) {
    in_flight_.Swap(&pending_);
    pending_.Clear();
    in_flight_.set_request_id(request_id_);
    has_pending_ = false;
    writing_ = true;
    if (final_seen_ && final_status_.ok()) {
      finish_called_ = true;
      return Action::kWriteAndFinish;
    }
    return Action::kWrite;
  }
  if (final_seen_) {
    finish_called_ = true;
    return Action::kFinish;
  }
  return Action::kNone;
}

void GenerateReactor::Pump() {
  Action action;
  grpc::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    action = NextActionLocked();
    status = final_status_;
  }
  // After a finishing operation starts, OnDone may delete `this` at any time
  // (once no reaction is running): nothing may touch members afterwards.
  switch (action) {
    case Action::kNone: break;
    case Action::kWrite: StartWrite(&in_flight_); break;
    case Action::kWriteAndFinish: StartWriteAndFinish(&in_flight_, grpc::WriteOptions(), status); break;
    case Action::kFinish: Finish(status); break;
  }
}

void GenerateReactor::LogSummary() const {
  const double elapsed_ms = std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - started_at_).count();
  if (!final_status_.ok()) {
    // Same numbering in gRPC and absl: reuse absl's names.
    spdlog::info("request {} failed: {}: {} tokens_in={} tokens_out={} total_ms={:.1f}",
                 request_id_,
                 absl::StatusCodeToString(static_cast<absl::StatusCode>(final_status_.error_code())),
                 final_status_.error_message(), prompt_tokens_, num_output_tokens_,
                 elapsed_ms);
    return;
  }
  spdlog::info("request {} tokens_in={} tokens_out={} ttft_ms={:.1f} total_ms={:.1f} finish={}",
               request_id_, summary_.usage.prompt_tokens, summary_.usage.completion_tokens,
               summary_.timings.time_to_first_token_ms, summary_.timings.total_ms,
               FinishReasonName(summary_.finish_reason));
}

}  // namespace gemma::server
