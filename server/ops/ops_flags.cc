#include "server/ops/ops_flags.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/ops/auth.h"

namespace gemma::server::ops {
namespace {

constexpr int kDefaultMetricsPort = 9090;

void AddLimitFlags(CLI::App& app, OpsOptions& o) {
  app.add_option("--max-prompt-tokens", o.limits.max_prompt_tokens,
                 "longest prompt accepted, in tokens (0 = the context bounds it)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  // 1 would refuse every request: a prompt has a token and a request asks for at least one more.
  app.add_option("--max-total-tokens", o.limits.max_total_tokens,
                 "prompt + max_tokens accepted (0 = the context bounds it)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const long long x = std::strtoll(v.c_str(), &end, 10);
            if (end == v.c_str() || *end != '\0' || x < 0 || x == 1 || x > INT32_MAX) {
              return "must be 0 (the context bounds it) or at least 2 (a prompt token and a generated one), got " + v;
            }
            return "";
          },
          "0|N>=2"))
      ->capture_default_str();
  app.add_option("--max-message-bytes", o.max_message_bytes,
                 "largest request message gRPC accepts (0 = gRPC's 4 MiB)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--request-timeout-s", o.request_timeout_s,
                 "a Generate running longer is cancelled with DEADLINE_EXCEEDED (0 = none)")
      ->check(SecondsAtMost(86400.0 * 7))
      ->capture_default_str();
  app.add_option("--max-concurrent-streams", o.max_concurrent_streams,
                 "Generate streams in flight; beyond it RESOURCE_EXHAUSTED (0 = unlimited)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace

CLI::Validator SecondsAtMost(double max_s) {
  return CLI::Validator(
      [max_s](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0' || !(x >= 0.0 && x <= max_s)) {
          return "must be a number of seconds in [0, " + std::to_string(static_cast<int64_t>(max_s)) + "], got " + v;
        }
        return "";
      },
      "SECONDS");
}

void AddOpsFlags(CLI::App& app, OpsOptions& o, OpsFlagValues& values) {
  o.metrics_port = kDefaultMetricsPort;
  values.metrics_port =
      app.add_option("--metrics-port", o.metrics_port,
                     "Prometheus /metrics HTTP port (-1 = off, 0 = any free port)")
          ->check(CLI::Range(-1, 65535))
          ->capture_default_str();
  app.add_option("--metrics-host", o.metrics_host, "address of /metrics (default: --host)");
  app.add_option("--api-key", values.api_keys,
                 "accepted API key (repeatable); calls need 'authorization: Bearer KEY'");
  app.add_option("--api-key-file", values.api_key_file, "file of API keys, one per line");
  app.add_option("--tls-cert", o.tls.cert_file, "server certificate chain (PEM); enables TLS");
  app.add_option("--tls-key", o.tls.key_file, "server private key (PEM)");
  app.add_option("--tls-client-ca", o.tls.client_ca_file,
                 "CA (PEM) client certificates must chain to; enables mutual TLS");
  AddLimitFlags(app, o);
  app.add_option("--log-format", o.log_format, "text | json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

absl::Status FinishOpsFlags(const OpsFlagValues& values, OpsOptions& o) {
  o.metrics_port_required = values.metrics_port != nullptr && values.metrics_port->count() > 0;
  absl::StatusOr<std::vector<std::string>> keys = LoadApiKeys(values.api_keys, values.api_key_file);
  if (!keys.ok()) return keys.status();
  o.api_keys = *std::move(keys);
  return ValidateTlsOptions(o.tls);
}

}  // namespace gemma::server::ops
