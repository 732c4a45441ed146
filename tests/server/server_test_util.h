// Helpers for the server tests: an in-process gemma-serve on a loopback port
// (CPU backend, fortunes model), stream collection, the golden fixture, and a
// subprocess runner for the real binaries.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "gemma/v1/gemma.grpc.pb.h"
#include "server/app/server.h"

namespace gemma::server::testing {

inline const std::string kModelDir = std::string(GEMMA_MODELS_DIR) + "/gemma4-fortunes";
inline const std::string kBinDir = GEMMA_BIN_DIR;

ServerOptions TestServerOptions();
// Started and loaded; fails the test (and returns null) on error.
std::unique_ptr<GemmaServer> StartTestServer(const ServerOptions& options = TestServerOptions());

std::shared_ptr<grpc::Channel> Connect(const std::string& address);
std::unique_ptr<v1::Gemma::Stub> NewStub(const std::string& address);

// Everything one Generate stream returned.
struct StreamResult {
  grpc::Status status;
  std::vector<int32_t> ids;
  std::string text;
  std::vector<std::string> deltas;       // text of each message, in order
  std::string reasoning;
  std::vector<v1::ToolCall> tool_calls;
  int num_messages = 0;
  std::vector<std::string> request_ids;  // as echoed by each message
  v1::Finish finish;
  bool has_finish = false;
  std::vector<v1::TokenLogprob> logprobs;
};
StreamResult RunStream(v1::Gemma::Stub& stub, const v1::GenerateRequest& request,
                       std::chrono::milliseconds timeout = std::chrono::seconds(120));

// A greedy text request of exactly `max_tokens` tokens (eos ignored).
v1::GenerateRequest GreedyText(const std::string& text, int max_tokens);

struct GoldenPrompt {
  std::string text;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> greedy;
  std::vector<double> margins;
};
std::vector<GoldenPrompt> LoadGolden();
// Steps before the first whose top-2 logit margin is below `min_margin`:
// beyond it fp32 and the float64 reference may legitimately disagree.
size_t TrustedPrefix(const GoldenPrompt& golden, double min_margin = 0.01);

// A child process whose stdout+stderr a background thread collects.
class Subprocess {
 public:
  explicit Subprocess(const std::vector<std::string>& argv);
  ~Subprocess();  // kills the child if it still runs
  // The first output line containing `needle`, or "" at EOF / timeout.
  std::string WaitForLine(const std::string& needle, std::chrono::milliseconds timeout);
  void Signal(int signal_number);
  // Exit code, or 128 + signal when killed by one; -1 on timeout.
  int Wait(std::chrono::milliseconds timeout);
  std::string output() const;  // everything read so far

 private:
  struct Output;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::shared_ptr<Output> output_;
  std::thread reader_;
};

// Runs argv to completion; returns its stdout+stderr and sets *exit_code.
std::string RunCommand(const std::vector<std::string>& argv, int* exit_code);

// Polls `predicate` until true or `timeout`; returns its last value.
template <typename Predicate>
bool Eventually(Predicate predicate, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace gemma::server::testing
