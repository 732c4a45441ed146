#include "server/ops/ops_engine.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace gemma::server::ops {

struct OpsEngine::RequestState {
  std::string request_id;
  Clock::time_point last_token_at{};  // the engine's event thread only
  int num_tokens_seen = 0;            // the engine's event thread only
  // Its entry in deadlines_, guarded by OpsEngine::mu_.
  std::optional<Deadlines::iterator> deadline_entry;
  std::mutex mu;  // guards the two flags
  bool finished = false;
  bool timed_out = false;

  bool finished_flag() {
    std::lock_guard<std::mutex> lock(mu);
    return finished;
  }
};

OpsEngine::OpsEngine(Engine* inner, ServerMetrics* metrics, const OpsEngineOptions& options)
    : inner_(inner), metrics_(metrics), options_(options) {
  if (options_.request_timeout_s > 0) timer_ = std::thread([this] { WatchDeadlines(); });
}

OpsEngine::~OpsEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (timer_.joinable()) timer_.join();
}

int OpsEngine::num_in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_in_flight_;
}

absl::Status OpsEngine::Submit(GenerationRequest request, EventCallback on_event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.max_concurrent_streams > 0 && num_in_flight_ >= options_.max_concurrent_streams) {
      if (metrics_ != nullptr) metrics_->OnRejected("RESOURCE_EXHAUSTED");
      return absl::ResourceExhaustedError(
          absl::StrCat(num_in_flight_, " streams are in flight; --max-concurrent-streams is ",
                       options_.max_concurrent_streams));
    }
    ++num_in_flight_;
  }
  auto state = std::make_shared<RequestState>();
  state->request_id = request.request_id;
  EventCallback wrapped = [this, state, on_event = std::move(on_event)](GenerationEvent&& event) {
    OnEvent(*state, event);
    on_event(std::move(event));
  };
  const std::string id = request.request_id;
  absl::Status submitted = inner_->Submit(std::move(request), std::move(wrapped));
  std::lock_guard<std::mutex> lock(mu_);
  if (!submitted.ok()) {
    --num_in_flight_;
    if (metrics_ != nullptr) metrics_->OnRejected(absl::StatusCodeToString(submitted.code()));
    return submitted;
  }
  if (options_.request_timeout_s > 0) {
    const auto timeout = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(options_.request_timeout_s));
    // A request that already finished needs no deadline.
    if (!state->finished_flag()) {
      state->deadline_entry = deadlines_.emplace(Clock::now() + timeout, state);
    }
    wake_.notify_all();
  }
  return absl::OkStatus();
}

void OpsEngine::OnEvent(RequestState& state, GenerationEvent& event) {
  const Clock::time_point now = Clock::now();
  const int num_tokens = static_cast<int>(event.token_ids.size());
  if (num_tokens > 0) {
    // The first token's wait is TTFT, not an inter-token gap.
    if (metrics_ != nullptr && state.num_tokens_seen > 0) {
      metrics_->OnInterTokenGap(std::chrono::duration<double>(now - state.last_token_at).count(),
                                num_tokens);
    }
    state.last_token_at = now;
    state.num_tokens_seen += num_tokens;
  }
  if (!event.finished) return;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    state.finished = true;
    if (state.timed_out && event.finish_reason == FinishReason::kCancelled) {
      event.finish_reason = FinishReason::kError;
      event.error = absl::DeadlineExceededError(absl::StrCat(
          "the request ran longer than --request-timeout-s=", options_.request_timeout_s));
    }
  }
  if (metrics_ != nullptr) metrics_->OnFinished(event);
  std::lock_guard<std::mutex> lock(mu_);
  --num_in_flight_;
  if (state.deadline_entry) {
    deadlines_.erase(*state.deadline_entry);
    state.deadline_entry.reset();
  }
}

void OpsEngine::WatchDeadlines() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (deadlines_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const auto next = deadlines_.begin();
    if (Clock::now() < next->first) {
      wake_.wait_until(lock, next->first);
      continue;
    }
    std::shared_ptr<RequestState> state = next->second.lock();
    deadlines_.erase(next);
    if (state == nullptr) continue;
    state->deadline_entry.reset();
    {
      std::lock_guard<std::mutex> state_lock(state->mu);
      if (state->finished) continue;
      state->timed_out = true;
    }
    lock.unlock();
    spdlog::info("request {} timed out after {} s (--request-timeout-s): cancelling",
                 state->request_id, options_.request_timeout_s);
    inner_->Cancel(state->request_id);
    lock.lock();
  }
}

}  // namespace gemma::server::ops
