// One measured Generate stream on gRPC's callback API.
//
// Why the callback API rather than a thread per stream: at concurrency 64+
// (or --request-rate inf with thousands of requests) a thread per stream
// means thousands of mostly idle threads whose wake-ups, not the server, set
// the measured latencies. With a ClientReadReactor per stream, gRPC's own
// completion threads deliver each message and the reactor only takes a
// timestamp and counts tokens (no locks, no allocation beyond the ITL list),
// so one dispatch thread plus gRPC's pool sustain any in-flight count.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "clients/loadgen/request_result.h"
#include "clients/loadgen/workload.h"
#include "gemma/v1/gemma.grpc.pb.h"

namespace gemma::loadgen {

// The per-request settings shared by every call of a run.
struct CallSettings {
  std::string api_key;       // "" = no authorization metadata
  double timeout_s = 600;
  bool ignore_eos = false;
  float temperature = 0;
  uint64_t seed = 0;         // request i samples with seed + i when temperature > 0
};

// The GenerateRequest for `spec`, the index-th request of a run. The server
// refuses an id still in flight, and it frees an id only after the client has
// seen the stream end, so every request needs its own `request_id`.
v1::GenerateRequest MakeGenerateRequest(const RequestSpec& spec, const CallSettings& settings,
                                        int index, const std::string& request_id);

// The name of a gRPC status code ("OK", "UNAVAILABLE", ...).
std::string StatusCodeName(grpc::StatusCode code);

// Thread-safety: gRPC serializes a reactor's callbacks; `done` runs once, on
// a gRPC thread, after which the call deletes itself.
class GenerateCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  using DoneCallback = std::function<void(RequestResult)>;
  // Sends `request` on `stub` (which must outlive the call) and measures it.
  static void Start(v1::Gemma::Stub* stub, v1::GenerateRequest request,
                    const CallSettings& settings, DoneCallback done);

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  using Clock = std::chrono::steady_clock;
  GenerateCall(v1::GenerateRequest request, DoneCallback done);

  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
  DoneCallback done_;
  Clock::time_point sent_;
  Clock::time_point last_token_;
  bool has_finish_ = false;
  RequestResult result_;
};

}  // namespace gemma::loadgen
