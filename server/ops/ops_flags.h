// gemma-serve's operations flags (CLI11), registered into the server's app.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "server/ops/ops_options.h"

namespace gemma::server::ops {

// What the flags hold until FinishOpsFlags turns them into OpsOptions.
struct OpsFlagValues {
  std::vector<std::string> api_keys;
  std::string api_key_file;
  CLI::Option* metrics_port = nullptr;
};

void AddOpsFlags(CLI::App& app, OpsOptions& options, OpsFlagValues& values);

// A number of seconds in [0, max_s]: CLI::Range alone lets "nan" through
// (every comparison with NaN is false).
CLI::Validator SecondsAtMost(double max_s);
// After parsing: loads the API keys, checks TLS files and flag combinations.
// INVALID_ARGUMENT naming the flag.
absl::Status FinishOpsFlags(const OpsFlagValues& values, OpsOptions& options);

}  // namespace gemma::server::ops
