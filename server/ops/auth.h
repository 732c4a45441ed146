// API-key authentication: with keys configured, every gemma.v1 call needs
// `authorization: Bearer <key>` metadata (the scheme's name in any case, as
// RFC 6750 allows), else UNAUTHENTICATED;
// grpc.health.v1 and server reflection stay open (probes, grpcurl).
//
// Why a check the service calls first in each gemma.v1 handler, rather than
// gRPC's AuthMetadataProcessor or an interceptor: the processor cannot be
// attached to plain-text credentials in gRPC 1.51 (it asserts), and the
// 1.51 experimental server interceptors cannot fail a call with a status
// (only cancel it). The service already gates every handler on its state,
// so the key check sits in that same gate; health and reflection are other
// services and never see it.
//
// Thread-safety: immutable after construction; Check is safe from any thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gemma::server::ops {

// The keys from --api-key (repeatable) and --api-key-file (one key per line;
// blank lines and lines starting with '#' are skipped, surrounding spaces
// trimmed). INVALID_ARGUMENT naming the flag for an unreadable file or an
// empty/blank key.
absl::StatusOr<std::vector<std::string>> LoadApiKeys(const std::vector<std::string>& flag_keys,
                                                     const std::string& key_file);

// Whether an `authorization` value is "Bearer KEY" (the scheme in any case,
// RFC 6750) with KEY among `keys`, compared in constant time. The gRPC
// metadata check and the HTTP front both use it.
bool IsAuthorizedBearer(std::string_view authorization, const std::vector<std::string>& keys);

class ApiKeyChecker {
 public:
  // No keys: every call passes.
  explicit ApiKeyChecker(std::vector<std::string> keys = {}) : keys_(std::move(keys)) {}
  bool enabled() const { return !keys_.empty(); }
  // OK, or UNAUTHENTICATED saying what was wrong (never echoing the key).
  grpc::Status Check(const grpc::ServerContextBase& context) const;

 private:
  bool IsKnownKey(std::string_view key) const;
  std::vector<std::string> keys_;
};

}  // namespace gemma::server::ops
