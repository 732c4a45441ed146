#include "server/status_mapping.h"

#include <string>

namespace gemma::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  // Both follow google.rpc.Code; anything outside it is a bug somewhere, and
  // the caller still deserves an error rather than a bogus code.
  if (code < grpc::StatusCode::CANCELLED || code > grpc::StatusCode::UNAUTHENTICATED) {
    return grpc::Status(grpc::StatusCode::UNKNOWN, std::string(status.message()));
  }
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(status.message()));
}

}  // namespace gemma::server
