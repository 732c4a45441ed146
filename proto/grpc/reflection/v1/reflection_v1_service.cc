#include "grpc/reflection/v1/reflection_v1_service.h"

#include <set>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

namespace gemma::reflection {
namespace {

namespace pb = google::protobuf;
using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;

void SetError(grpc::StatusCode code, const std::string& message,
              ServerReflectionResponse* response) {
  response->mutable_error_response()->set_error_code(code);
  response->mutable_error_response()->set_error_message(message);
}

// Answers about one stream; remembers the files it sent, so that each file
// goes out once per stream (clients cache them).
class StreamAnswerer {
 public:
  explicit StreamAnswerer(const std::vector<std::string>& services) : services_(services) {}

  void Answer(const ServerReflectionRequest& request, ServerReflectionResponse* response) {
    response->set_valid_host(request.host());
    *response->mutable_original_request() = request;
    switch (request.message_request_case()) {
      case ServerReflectionRequest::kFileByFilename:
        SendFile(pool_->FindFileByName(request.file_by_filename()), response);
        break;
      case ServerReflectionRequest::kFileContainingSymbol:
        SendFile(pool_->FindFileContainingSymbol(request.file_containing_symbol()), response);
        break;
      case ServerReflectionRequest::kFileContainingExtension:
        SendExtensionFile(request.file_containing_extension(), response);
        break;
      case ServerReflectionRequest::kAllExtensionNumbersOfType:
        ListExtensionNumbers(request.all_extension_numbers_of_type(), response);
        break;
      case ServerReflectionRequest::kListServices:
        for (const std::string& name : services_) {
          response->mutable_list_services_response()->add_service()->set_name(name);
        }
        break;
      default:
        SetError(grpc::StatusCode::UNIMPLEMENTED, "the request type is not supported", response);
    }
  }

 private:
  void SendFile(const pb::FileDescriptor* file, ServerReflectionResponse* response) {
    if (file == nullptr) {
      SetError(grpc::StatusCode::NOT_FOUND, "not found", response);
      return;
    }
    AddFileAndDependencies(file, response);
  }

  void AddFileAndDependencies(const pb::FileDescriptor* file, ServerReflectionResponse* response) {
    if (!sent_.insert(file->name()).second) return;
    pb::FileDescriptorProto proto;
    file->CopyTo(&proto);
    proto.SerializeToString(
        response->mutable_file_descriptor_response()->add_file_descriptor_proto());
    for (int i = 0; i < file->dependency_count(); ++i) {
      AddFileAndDependencies(file->dependency(i), response);
    }
  }

  void SendExtensionFile(const grpc::reflection::v1::ExtensionRequest& request,
                         ServerReflectionResponse* response) {
    const pb::Descriptor* type = pool_->FindMessageTypeByName(request.containing_type());
    const pb::FieldDescriptor* extension =
        type == nullptr ? nullptr : pool_->FindExtensionByNumber(type, request.extension_number());
    SendFile(extension == nullptr ? nullptr : extension->file(), response);
  }

  void ListExtensionNumbers(const std::string& type_name, ServerReflectionResponse* response) {
    const pb::Descriptor* type = pool_->FindMessageTypeByName(type_name);
    if (type == nullptr) {
      SetError(grpc::StatusCode::NOT_FOUND, "type not found", response);
      return;
    }
    std::vector<const pb::FieldDescriptor*> extensions;
    pool_->FindAllExtensions(type, &extensions);
    auto* numbers = response->mutable_all_extension_numbers_response();
    numbers->set_base_type_name(type->full_name());
    for (const pb::FieldDescriptor* extension : extensions) {
      numbers->add_extension_number(extension->number());
    }
  }

  const pb::DescriptorPool* pool_ = pb::DescriptorPool::generated_pool();
  const std::vector<std::string>& services_;
  std::set<std::string> sent_;
};

}  // namespace

grpc::Status ReflectionV1Service::ServerReflectionInfo(
    grpc::ServerContext* /*context*/,
    grpc::ServerReaderWriter<ServerReflectionResponse, ServerReflectionRequest>* stream) {
  StreamAnswerer answerer(services_);
  ServerReflectionRequest request;
  while (stream->Read(&request)) {
    ServerReflectionResponse response;
    answerer.Answer(request, &response);
    if (!stream->Write(response)) break;
  }
  return grpc::Status::OK;
}

}  // namespace gemma::reflection
