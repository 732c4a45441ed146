// gemma-serve's command line (CLI11). Bad flags give a message naming the
// flag and exit code 2.
#pragma once

#include <optional>
#include <string>

#include "server/app/server.h"

namespace gemma::server {

struct ServeFlags {
  ServerOptions server;
  double grace_period_s = 30.0;
  std::string log_level = "info";
};

// Parsed flags, or the exit code to return at once (0 for --help, 2 for bad
// flags, after printing why).
struct ParsedFlags {
  std::optional<ServeFlags> flags;
  int exit_code = 0;
};
ParsedFlags ParseServeFlags(int argc, char** argv);

// The model directory when --model is absent: $GEMMA_MODEL_DIR, else the
// embedded demo model next to the executable (<exe>/../../models/... in a
// build tree, <exe>/../share/gemma-serve/models/... when installed). Empty
// when none exists.
std::string DefaultModelDir();

}  // namespace gemma::server
