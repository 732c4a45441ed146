// One Generate stream: prepares the request on the PreparePool (tokenizing
// off the gRPC threads), submits it to the engine and writes its events to
// the client, one write in flight at a time. Events that arrive
// while a write is in flight are merged into the next message, so a slow
// reader costs one growing message, never a blocked engine event thread.
//
// Lifetime: created by the service, deleted in OnDone. gRPC calls OnDone only
// after Finish, and the reactor never finishes while its preparation is
// queued or running, so the pool task may use `this` (and the request, which
// gRPC keeps until OnDone). A client that cancels while the task is queued
// makes it return at once: nothing is built or submitted. The engine's callback
// reaches the reactor through a shared Link that OnDone severs, so an event
// arriving after the call ended is dropped instead of touching freed memory.
//
// Thread-safety: engine events arrive on the engine's event thread, gRPC reactions
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
#include "server/submission.h"

namespace gemma::server {

class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Queues the preparation of `request` (`id` already registered in
  // path.calls), which then submits it. A full queue, a bad field or a
  // refused submit finishes the call with the mapped status. `request` must
  // stay valid until OnDone (gRPC's request message does).
  static GenerateReactor* Start(const SubmitPath& path, const v1::GenerateRequest* request,
                                std::string id);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct Link;
  enum class Action { kNone, kWrite, kWriteAndFinish, kFinish };

  GenerateReactor(const SubmitPath& path, const v1::GenerateRequest* request,
                  std::string request_id);
  ~GenerateReactor() override = default;

  // PreparePool worker: builds and submits, unless the client left while the
  // task was queued (or the pool cancelled it: `run` false).
  void Prepare(bool run);
  absl::Status BuildAndSubmit();

  void OnEvent(GenerationEvent&& event);  // the engine's event thread
  // Decides the next gRPC operation under `mu_`, then starts it unlocked.
  void Pump();
  // Starts what NextActionLocked decided (unlocked).
  void Act(Action action, const grpc::Status& status);
  Action NextActionLocked();
  void LogSummary() const;

  const SubmitPath path_;
  Engine* const engine_;
  ActiveCalls* const calls_;
  const v1::GenerateRequest* const request_;
  const std::string request_id_;
  int prompt_tokens_ = 0;          // set once built
  const std::chrono::steady_clock::time_point started_at_;
  std::shared_ptr<Link> link_;

  std::mutex mu_;
  v1::GenerateResponse pending_;   // merged events not yet written
  bool has_pending_ = false;
  v1::GenerateResponse in_flight_; // owned by gRPC while writing_
  bool writing_ = false;
  bool preparing_ = true;          // queued on, or running in, the pool
  bool final_seen_ = false;        // the engine sent its last event
  bool cancelled_ = false;         // the client cancelled or its deadline passed
  bool finish_called_ = false;
  grpc::Status final_status_;
  GenerationEvent summary_;        // last event's finish fields, for the log line
  int num_output_tokens_ = 0;
};

}  // namespace gemma::server
