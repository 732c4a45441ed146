// Server credentials from --tls-cert / --tls-key (PEM) and optional
// --tls-client-ca (mutual TLS: client certificates are required and must
// chain to that CA). Without --tls-cert the server is plain-text.
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gemma::server::ops {

struct TlsOptions {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  bool enabled() const { return !cert_file.empty(); }
};

// INVALID_ARGUMENT naming the flag: one of cert/key without the other, a
// client CA without a certificate, or a file that cannot be read or holds no
// PEM block.
absl::Status ValidateTlsOptions(const TlsOptions& options);

// Insecure credentials when TLS is off. REQUIRES: ValidateTlsOptions passed
// (files are re-read; a file gone since is reported the same way).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options);

// The whole file, or INVALID_ARGUMENT naming `flag` when it is unreadable or
// holds no "-----BEGIN" block.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& flag);

}  // namespace gemma::server::ops
