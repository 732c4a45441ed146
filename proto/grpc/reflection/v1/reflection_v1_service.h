// grpc.reflection.v1.ServerReflection over the process's generated descriptor
// pool, as gRPC's own v1alpha plugin answers (gRPC 1.51 ships no v1 service).
// Registered beside the v1alpha plugin by GemmaServer.
//
// Thread-safety: immutable after construction; each stream keeps its own
// state on its handler's stack.
#pragma once

#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace gemma::reflection {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // `services`: the fully-qualified names list_services answers.
  explicit ReflectionV1Service(std::vector<std::string> services)
      : services_(std::move(services)) {}

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

 private:
  const std::vector<std::string> services_;
};

}  // namespace gemma::reflection
