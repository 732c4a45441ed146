// gemma-cli's transport security and API key: TLS (--tls, --tls-ca,
// mutual TLS with --tls-cert/--tls-key) and `authorization: Bearer KEY`.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace gemma::cli {

struct SecurityOptions {
  std::string api_key;        // sent as "authorization: Bearer <key>" when set
  bool tls = false;           // TLS with the system's roots (implied by the files below)
  std::string tls_ca_file;    // CA to verify the server with
  std::string tls_cert_file;  // client certificate (mutual TLS)
  std::string tls_key_file;   // client private key
  // File contents, filled by LoadSecurityFiles.
  std::string ca_pem, cert_pem, key_pem;
};

// Reads the PEM files. False with `*error` naming the flag and path when one
// cannot be read, or when only one of --tls-cert/--tls-key is given.
bool LoadSecurityFiles(SecurityOptions* options, std::string* error);

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const SecurityOptions& options);
// Adds the API key (if any) to a call.
void AddCallCredentials(const SecurityOptions& options, grpc::ClientContext* context);

}  // namespace gemma::cli
