// Drives a workload against a server: channels, the model's limits, and the
// dispatch loop that releases requests on schedule within a cap on streams
// in flight.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "clients/loadgen/flags.h"
#include "clients/loadgen/generate_call.h"
#include "clients/loadgen/request_result.h"
#include "clients/loadgen/workload.h"
#include "gemma/v1/gemma.grpc.pb.h"

namespace gemma::loadgen {

struct RunOutcome {
  std::vector<RequestResult> results;  // in request order
  double duration_s = 0;               // first send -> last stream closed
};

// Thread-compatible: one Run at a time (the calls it starts finish inside it).
class LoadRunner {
 public:
  explicit LoadRunner(const LoadgenOptions& options);

  // Opens every channel's connection, so that no measured request pays for a
  // TCP handshake; false (with `*error`) when one cannot connect in 30 s.
  bool Connect(std::string* error);

  // Asks the server for its vocabulary, context and BOS id; false (with
  // `*error`) when it cannot be reached.
  bool FetchModelLimits(ModelLimits* limits, std::string* error);

  // Sends specs[i] at arrivals_s[i] after the start (later when
  // `max_in_flight` streams are already open; 0 = no cap) and returns once
  // every stream has closed.
  RunOutcome Run(const std::vector<RequestSpec>& specs, const std::vector<double>& arrivals_s,
                 int max_in_flight);

 private:
  // Starts request i (its result lands in `outcome->results[i]`), then
  // calls `done` on the thread that finished it.
  void StartRequest(const RequestSpec& spec, int index, const std::string& request_id,
                    RunOutcome* outcome, std::function<void()> done);

  Protocol protocol_;
  std::string http_addr_;
  CallSettings settings_;
  std::string request_id_prefix_;  // random per process: concurrent loadgens never collide
  int num_runs_ = 0;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Gemma::Stub>> stubs_;  // one per channel
};

}  // namespace gemma::loadgen
