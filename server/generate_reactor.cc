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

GenerateReactor::GenerateReactor(const SubmitPath& path, const v1::GenerateRequest* request,
                                 std::string request_id)
    : path_(path),
      engine_(path.engine),
      calls_(path.calls),
      request_(request),
      request_id_(std::move(request_id)),
      started_at_(std::chrono::steady_clock::now()),
      link_(std::make_shared<Link>()) {
  link_->reactor = this;
}

GenerateReactor* GenerateReactor::Start(const SubmitPath& path,
                                        const v1::GenerateRequest* request, std::string id) {
  auto* reactor = new GenerateReactor(path, request, std::move(id));
  absl::Status queued =
      path.pool->Post(PromptBytes(*request), [reactor](bool run) { reactor->Prepare(run); });
  if (!queued.ok()) {
    {
      std::lock_guard<std::mutex> lock(reactor->mu_);
      reactor->preparing_ = false;
      reactor->final_seen_ = true;
      reactor->final_status_ = ToGrpcStatus(queued);
    }
    reactor->Pump();
  }
  return reactor;
}

void GenerateReactor::Prepare(bool run) {
  bool skip;
  {
    std::lock_guard<std::mutex> lock(mu_);
    skip = cancelled_;
  }
  absl::Status status;
  if (!run) {
    status = absl::UnavailableError("the server is shutting down");
  } else if (!skip) {
    status = BuildAndSubmit();
  }
  Action action;
  grpc::Status final_status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    preparing_ = false;
    if (!status.ok()) {
      final_seen_ = true;
      final_status_ = ToGrpcStatus(status);
    }
    // Decided under the same lock that clears preparing_: once it is
    // released, an engine event or a write completion may finish the call
    // and OnDone delete `this`, so this thread may only act on what it took.
    // A cancelled call finishes here (NextActionLocked waited for preparing_).
    action = NextActionLocked();
    final_status = final_status_;
  }
  Act(action, final_status);
}

absl::Status GenerateReactor::BuildAndSubmit() {
  absl::StatusOr<GenerationRequest> built = PrepareGeneration(path_, *request_, request_id_);
  if (!built.ok()) return built.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    prompt_tokens_ = static_cast<int>(built->prompt_ids.size());
    if (cancelled_) return absl::OkStatus();  // the client left while it was built
  }
  std::shared_ptr<Link> link = link_;
  absl::Status submitted = engine_->Submit(*std::move(built), [link](GenerationEvent&& event) {
    std::lock_guard<std::mutex> lock(link->mu);
    if (link->reactor != nullptr) link->reactor->OnEvent(std::move(event));
  });
  if (!submitted.ok()) return submitted;
  bool cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled = cancelled_;
  }
  // OnCancel's engine cancel may have come before the submit.
  if (cancelled) engine_->Cancel(request_id_);
  return absl::OkStatus();
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
  // Finishing would let gRPC delete `this` under the pool task.
  if (finish_called_ || writing_ || preparing_) return Action::kNone;
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
  Act(action, status);
}

void GenerateReactor::Act(Action action, const grpc::Status& status) {
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
