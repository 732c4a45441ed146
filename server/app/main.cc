// gemma-serve: loads a Gemma 4 model and serves gemma.v1.Gemma over gRPC.
// SIGTERM/SIGINT drain: health NOT_SERVING, new calls UNAVAILABLE, streams in
// flight finish (up to --grace-period-s), exit 0. A second signal exits at
// once with code 1.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "server/app/flags.h"
#include "server/ops/json_log.h"
#include "server/app/server.h"
#include "spdlog/spdlog.h"

namespace {

// Blocks SIGTERM/SIGINT in this thread and, by inheritance, in every thread
// started later, so that sigwait() below is the only place they arrive.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

}  // namespace

int main(int argc, char** argv) {
  const sigset_t stop_signals = BlockStopSignals();
  gemma::server::ParsedFlags parsed = gemma::server::ParseServeFlags(argc, argv);
  if (!parsed.flags) return parsed.exit_code;
  const gemma::server::ServeFlags& flags = *parsed.flags;
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  gemma::server::ops::SetLogFormat(flags.server.ops.log_format);

  auto server = gemma::server::GemmaServer::Start(flags.server);
  if (!server.ok()) {
    spdlog::error("{}", server.status().ToString());
    return 1;
  }
  spdlog::info("loading {} (backend {})", flags.server.backend.model_dir, flags.server.backend.backend);
  if (absl::Status loaded = (*server)->Load(); !loaded.ok()) {
    spdlog::error("loading the model failed: {}", loaded.ToString());
    return 1;
  }
  spdlog::info("listening on {}", (*server)->address());
  // Tests and scripts read the port from this line: get it out now.
  std::fflush(stdout);
  spdlog::default_logger()->flush();

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("received signal {}: draining (grace period {} s)", signal_number,
               flags.grace_period_s);
  // A second signal during the drain means "now": stop without waiting.
  std::thread([stop_signals] {
    int again = 0;
    sigwait(&stop_signals, &again);
    spdlog::warn("received signal {} again: exiting without draining", again);
    spdlog::default_logger()->flush();
    std::_Exit(1);
  }).detach();
  (*server)->Drain(std::chrono::milliseconds(static_cast<long>(flags.grace_period_s * 1000)));
  spdlog::info("stopped");
  spdlog::default_logger()->flush();
  return 0;
}
