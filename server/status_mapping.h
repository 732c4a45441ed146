// The one place where the engine's absl::Status becomes a gRPC status.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace gemma::server {

// Same code (absl and gRPC share the canonical code numbers) and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace gemma::server
