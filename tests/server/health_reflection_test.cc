// The standard services, through clients that know only the standard protos:
// grpc.health.v1 (Check, Watch) and server reflection (raw bytes on the wire,
// decoded with the reflection descriptors the gRPC library registers).
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <grpcpp/generic/generic_stub.h>

#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

grpc::Status Check(Health::Stub& stub, const std::string& service, HealthCheckResponse* out) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  HealthCheckRequest request;
  request.set_service(service);
  return stub.Check(&context, request, out);
}

TEST(HealthTest, NotServingWhileLoadingThenServing) {
  auto started = GemmaServer::Start(TestServerOptions());
  ASSERT_TRUE(started.ok()) << started.status();
  GemmaServer& server = **started;
  auto health = Health::NewStub(Connect(server.address()));
  HealthCheckResponse response;
  ASSERT_TRUE(Check(*health, "", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  ASSERT_TRUE(Check(*health, kServiceName, &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  auto stub = NewStub(server.address());
  StreamResult early = RunStream(*stub, GreedyText("The quick brown fox", 4));
  EXPECT_EQ(early.status.error_code(), grpc::StatusCode::UNAVAILABLE);

  ASSERT_TRUE(server.Load().ok());
  ASSERT_TRUE(Check(*health, "", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(Check(*health, kServiceName, &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check(*health, "no.such.Service", &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(RunStream(*stub, GreedyText("The quick brown fox", 4)).status.ok());
}

TEST(HealthTest, WatchReportsDraining) {
  std::unique_ptr<GemmaServer> server = StartTestServer();
  ASSERT_NE(server, nullptr);
  auto health = Health::NewStub(Connect(server->address()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  HealthCheckRequest request;
  request.set_service(kServiceName);
  auto watch = health->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  std::thread drain([&] { server->Drain(std::chrono::seconds(5)); });
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  drain.join();
  while (watch->Read(&response)) {}
  watch->Finish();
}

// One request/response exchange on grpc.reflection.v1alpha, with messages
// built and read through descriptors only.
class ReflectionClient {
 public:
  explicit ReflectionClient(const std::string& address) : channel_(Connect(address)) {
    const auto* pool = google::protobuf::DescriptorPool::generated_pool();
    request_type_ = pool->FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionRequest");
    response_type_ =
        pool->FindMessageTypeByName("grpc.reflection.v1alpha.ServerReflectionResponse");
  }
  bool ready() const { return request_type_ != nullptr && response_type_ != nullptr; }

  // Sends one request with string field `field` set to `value`.
  std::unique_ptr<google::protobuf::Message> Ask(const std::string& field, const std::string& value) {
    std::unique_ptr<google::protobuf::Message> request(factory_.GetPrototype(request_type_)->New());
    request->GetReflection()->SetString(request.get(), request_type_->FindFieldByName(field), value);
    std::string bytes = request->SerializeAsString();
    grpc::Slice slice(bytes);
    grpc::ByteBuffer out(&slice, 1), in;

    grpc::GenericStub stub(channel_);
    grpc::CompletionQueue cq;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto call = stub.PrepareCall(
        &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
    grpc::Status status;
    call->StartCall(Tag(1));
    bool ok = Next(cq, 1);
    if (ok) { call->Write(out, Tag(2)); ok = Next(cq, 2); }
    if (ok) { call->WritesDone(Tag(3)); ok = Next(cq, 3); }
    if (ok) { call->Read(&in, Tag(4)); ok = Next(cq, 4); }
    call->Finish(&status, Tag(5));
    Next(cq, 5);
    cq.Shutdown();
    void* tag;
    bool drained;
    while (cq.Next(&tag, &drained)) {}
    if (!ok || !status.ok()) return nullptr;
    grpc::Slice received;
    if (!in.DumpToSingleSlice(&received).ok()) return nullptr;
    std::unique_ptr<google::protobuf::Message> response(
        factory_.GetPrototype(response_type_)->New());
    if (!response->ParseFromArray(received.begin(), static_cast<int>(received.size()))) {
      return nullptr;
    }
    return response;
  }

 private:
  static void* Tag(intptr_t n) { return reinterpret_cast<void*>(n); }
  static bool Next(grpc::CompletionQueue& cq, intptr_t expected) {
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && tag == Tag(expected) && ok;
  }

  std::shared_ptr<grpc::Channel> channel_;
  const google::protobuf::Descriptor* request_type_ = nullptr;
  const google::protobuf::Descriptor* response_type_ = nullptr;
  google::protobuf::DynamicMessageFactory factory_;
};

TEST(ReflectionTest, ListsAndDescribesTheServices) {
  std::unique_ptr<GemmaServer> server = StartTestServer();
  ASSERT_NE(server, nullptr);
  ReflectionClient client(server->address());
  ASSERT_TRUE(client.ready());

  auto listed = client.Ask("list_services", "*");
  ASSERT_NE(listed, nullptr);
  const std::string text = listed->DebugString();
  EXPECT_NE(text.find("gemma.v1.Gemma"), std::string::npos) << text;
  EXPECT_NE(text.find("grpc.health.v1.Health"), std::string::npos) << text;

  auto described = client.Ask("file_containing_symbol", "gemma.v1.Gemma");
  ASSERT_NE(described, nullptr);
  const auto* descriptor = described->GetDescriptor();
  const auto* file_response_field = descriptor->FindFieldByName("file_descriptor_response");
  ASSERT_NE(file_response_field, nullptr);
  const auto& file_response = described->GetReflection()->GetMessage(*described, file_response_field);
  const auto* protos_field = file_response.GetDescriptor()->FindFieldByName("file_descriptor_proto");
  const int num_files = file_response.GetReflection()->FieldSize(file_response, protos_field);
  ASSERT_GT(num_files, 0) << described->DebugString();
  bool found_generate = false;
  for (int i = 0; i < num_files; ++i) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(
        file_response.GetReflection()->GetRepeatedString(file_response, protos_field, i)));
    for (const auto& service : file.service()) {
      if (service.name() != "Gemma") continue;
      for (const auto& method : service.method()) {
        if (method.name() == "Generate") found_generate = method.server_streaming();
      }
    }
  }
  EXPECT_TRUE(found_generate);

  auto health = client.Ask("file_containing_symbol", "grpc.health.v1.Health");
  ASSERT_NE(health, nullptr);
  EXPECT_EQ(health->DebugString().find("error_response"), std::string::npos)
      << health->DebugString();
}

}  // namespace
}  // namespace gemma::server::testing
