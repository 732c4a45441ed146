// The operations settings of gemma-serve: metrics endpoint, auth,
// TLS, limits and log format. Filled from flags (ops_flags.h) or by tests.
// The struct's defaults are "all off", so an in-process test server opens no
// extra port; the command line's defaults (e.g. --metrics-port 9090) are set
// in AddOpsFlags.
#pragma once

#include <string>
#include <vector>

#include "server/ops/limits.h"
#include "server/ops/tls.h"

namespace gemma::server::ops {

struct OpsOptions {
  // Prometheus /metrics over HTTP: -1 = off, 0 = any free port.
  int metrics_port = -1;
  // A busy port is fatal when the port was asked for; the command line's
  // default (9090) only warns, so a second server on a host still starts.
  bool metrics_port_required = true;
  std::string metrics_host;           // empty: the gRPC --host
  std::vector<std::string> api_keys;  // empty: no authentication
  TlsOptions tls;
  RequestLimits limits;
  int max_message_bytes = 0;        // gRPC max receive size; 0 = gRPC's 4 MiB
  double request_timeout_s = 0;     // 0 = none
  int max_concurrent_streams = 0;   // Generate streams in the engine; 0 = unlimited
  std::string log_format = "text";  // text | json
};

}  // namespace gemma::server::ops
