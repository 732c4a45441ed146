// An Engine decorator that adds what operations need around the real engine,
// without touching the scheduler or the stream reactors:
// - per-request metrics (inter-token gaps, finish reasons, latencies) from
//   the events as they pass by;
// - --max-concurrent-streams: Submit answers RESOURCE_EXHAUSTED at once when
//   that many requests are in the engine;
// - --request-timeout-s: a request still running after it is cancelled, and
//   its final event becomes a DEADLINE_EXCEEDED error (so the stream ends
//   with that status, naming the flag).
//
// Thread-safety: like Engine, every method is safe from any thread. Event
// callbacks run on the engine's event thread; the deadline timer on its own thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/core/engine.h"
#include "server/ops/server_metrics.h"

namespace gemma::server::ops {

struct OpsEngineOptions {
  int max_concurrent_streams = 0;  // 0 = unlimited
  double request_timeout_s = 0;    // 0 = none
};

class OpsEngine final : public Engine {
 public:
  // `inner` and `metrics` (may be null) must outlive this object.
  OpsEngine(Engine* inner, ServerMetrics* metrics, const OpsEngineOptions& options);
  ~OpsEngine() override;

  absl::Status Submit(GenerationRequest request, EventCallback on_event) override;
  void Cancel(const std::string& request_id) override { inner_->Cancel(request_id); }
  EngineStats Stats() const override { return inner_->Stats(); }
  const Backend& backend() const override { return inner_->backend(); }
  void Shutdown(std::chrono::milliseconds grace) override { inner_->Shutdown(grace); }

  int num_in_flight() const;

 private:
  struct RequestState;
  using Clock = std::chrono::steady_clock;

  void OnEvent(RequestState& state, GenerationEvent& event);
  void WatchDeadlines();

  Engine* const inner_;
  ServerMetrics* const metrics_;
  const OpsEngineOptions options_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  int num_in_flight_ = 0;
  // Deadline -> request. A request that finishes removes its entry.
  using Deadlines = std::multimap<Clock::time_point, std::weak_ptr<RequestState>>;
  Deadlines deadlines_;
  bool stopping_ = false;
  std::thread timer_;  // only with a request timeout
};

}  // namespace gemma::server::ops
