#include "clients/cli/credentials.h"

#include <fstream>
#include <sstream>

namespace gemma::cli {
namespace {

bool ReadFile(const std::string& path, const std::string& flag, std::string* out,
              std::string* error) {
  if (path.empty()) return true;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = flag + ": cannot read '" + path + "'";
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

}  // namespace

bool LoadSecurityFiles(SecurityOptions* o, std::string* error) {
  if (o->tls_cert_file.empty() != o->tls_key_file.empty()) {
    *error = o->tls_cert_file.empty() ? "--tls-key needs --tls-cert" : "--tls-cert needs --tls-key";
    return false;
  }
  if (!ReadFile(o->tls_ca_file, "--tls-ca", &o->ca_pem, error) ||
      !ReadFile(o->tls_cert_file, "--tls-cert", &o->cert_pem, error) ||
      !ReadFile(o->tls_key_file, "--tls-key", &o->key_pem, error)) {
    return false;
  }
  o->tls = o->tls || !o->tls_ca_file.empty() || !o->tls_cert_file.empty();
  return true;
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const SecurityOptions& o) {
  if (!o.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = o.ca_pem;  // empty: the system's roots
  ssl.pem_cert_chain = o.cert_pem;
  ssl.pem_private_key = o.key_pem;
  return grpc::SslCredentials(ssl);
}

void AddCallCredentials(const SecurityOptions& o, grpc::ClientContext* context) {
  if (!o.api_key.empty()) context->AddMetadata("authorization", "Bearer " + o.api_key);
}

}  // namespace gemma::cli
