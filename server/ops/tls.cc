#include "server/ops/tls.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace gemma::server::ops {

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", path, "' is not a PEM file"));
  }
  return text.str();
}

absl::Status ValidateTlsOptions(const TlsOptions& o) {
  if (o.cert_file.empty() != o.key_file.empty()) {
    return absl::InvalidArgumentError(o.cert_file.empty() ? "--tls-key needs --tls-cert"
                                                          : "--tls-cert needs --tls-key");
  }
  if (!o.client_ca_file.empty() && o.cert_file.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeServerCredentials(o);
  return credentials.status();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& o) {
  if (!o.enabled()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadPemFile(o.cert_file, "--tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile(o.key_file, "--tls-key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!o.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPemFile(o.client_ca_file, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace gemma::server::ops
