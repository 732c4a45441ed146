// One Generate stream: submits the request to the engine and writes its
// events to the client, one write in flight at a time. Events that arrive
// while a write is in flight are merged into the next message, so a slow
// reader costs one growing message, never a blocked engine thread.
//
// Lifetime: created by the service, deleted in OnDone. The engine's callback
// reaches the reactor through a shared Link that OnDone severs, so an event
// arriving after the call ended is dropped instead of touching freed memory.
//
// Thread-safety: engine events arrive on the engine thread, gRPC reactions
// on gRPC threads; `mu_` guards the stream state, and gRPC operations are
// started outside it.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

#include "engine/core/engine.h"
#include "gemma/v1/gemma.pb.h"
#include "server/active_calls.h"

namespace gemma::server {

class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Submits `request` (already validated and registered in `calls` under its
  // id). A refused submit finishes the call with the mapped status.
  static GenerateReactor* Start(Engine* engine, ActiveCalls* calls, GenerationRequest request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct Link;
  enum class Action { kNone, kWrite, kWriteAndFinish, kFinish };

  GenerateReactor(Engine* engine, ActiveCalls* calls, std::string request_id, int prompt_tokens);
  ~GenerateReactor() override = default;

  void OnEvent(GenerationEvent&& event);  // engine thread
  // Decides the next gRPC operation under `mu_`, then starts it unlocked.
  void Pump();
  Action NextActionLocked();
  void LogSummary() const;

  Engine* const engine_;
  ActiveCalls* const calls_;
  const std::string request_id_;
  const int prompt_tokens_;
  const std::chrono::steady_clock::time_point started_at_;
  std::shared_ptr<Link> link_;

  std::mutex mu_;
  v1::GenerateResponse pending_;   // merged events not yet written
  bool has_pending_ = false;
  v1::GenerateResponse in_flight_; // owned by gRPC while writing_
  bool writing_ = false;
  bool final_seen_ = false;        // the engine sent its last event
  bool cancelled_ = false;         // the client cancelled or its deadline passed
  bool finish_called_ = false;
  grpc::Status final_status_;
  GenerationEvent summary_;        // last event's finish fields, for the log line
  int num_output_tokens_ = 0;
};

}  // namespace gemma::server
