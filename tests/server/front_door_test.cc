// The gRPC front door: requests that do not parse, prompts provably longer
// than the context, grpc.reflection.v1, and the Bearer scheme in any case.
// Real gRPC over loopback against the in-process server.
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

// One unary exchange of raw bytes with `method`; a server-streaming method
// that fails before its first message looks the same on the wire.
grpc::Status CallRaw(const std::string& address, const std::string& method,
                     const std::string& bytes) {
  grpc::GenericStub stub(Connect(address));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  return done.get_future().get();
}

// A serialized message whose `field` (length-delimited) holds `value`.
std::string LengthDelimited(int field, const std::string& value) {
  std::string out(1, static_cast<char>(field << 3 | 2));
  out.push_back(static_cast<char>(value.size()));  // REQUIRES: < 128 bytes
  return out + value;
}

class FrontDoorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartTestServer();
    ASSERT_NE(server_, nullptr);
  }
  std::unique_ptr<GemmaServer> server_;
};

TEST_F(FrontDoorTest, UnparsableRequestsAreInvalidArgument) {
  const std::string invalid_utf8 = "id-\xC3\x28";
  // GenerateRequest.request_id is field 1 (see gemma.proto); ChatMessage.role
  // sits inside chat (field 4) > messages (field 1) > role (field 1).
  v1::GenerateRequest valid = GreedyText("hi", 1);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/gemma.v1.Gemma/Generate", LengthDelimited(1, invalid_utf8)},
      {"/gemma.v1.Gemma/Generate",
       LengthDelimited(4, LengthDelimited(1, LengthDelimited(1, "\xFF\xFE")))},
      {"/gemma.v1.Gemma/Generate", valid.SerializeAsString().substr(0, 3)},  // truncated
      {"/gemma.v1.Gemma/Generate", std::string("\xFF\xFF\xFF\xFF\xFF\xFF", 6)},
      {"/gemma.v1.Gemma/Tokenize", std::string("\x0A\x05ab", 4)},  // text says 5 bytes, has 2
      {"/gemma.v1.Gemma/Tokenize",  // chat (field 2) > messages > role
       LengthDelimited(2, LengthDelimited(1, LengthDelimited(1, "\xC0\xAF")))},
      {"/gemma.v1.Gemma/Detokenize", std::string("\x0A\x7F", 2)},
      {"/gemma.v1.Gemma/GetModelInfo", std::string("\x0B", 1)},  // start-group, never ended
  };
  for (const auto& [method, bytes] : cases) {
    SCOPED_TRACE(method);
    const grpc::Status status = CallRaw(server_->address(), method, bytes);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find("could not be parsed"), std::string::npos)
        << status.error_message();
  }
  // The same path still serves well-formed bytes.
  v1::TokenizeRequest tokenize;
  tokenize.set_text("hello");
  EXPECT_TRUE(CallRaw(server_->address(), "/gemma.v1.Gemma/Tokenize",
                      tokenize.SerializeAsString()).ok());
  EXPECT_TRUE(RunStream(*NewStub(server_->address()), valid).status.ok());
}

TEST_F(FrontDoorTest, TextProvablyLongerThanTheContextIsRefusedBeforeEncoding) {
  const size_t bytes_per_token = server_->tokenizer()->max_bytes_per_token();
  ASSERT_GT(bytes_per_token, 0u) << "the fixture's tokenizer should bound its pieces";
  auto stub = NewStub(server_->address());
  // Just enough bytes that even the longest pieces overflow a 1024 context.
  const std::string text(1024 * bytes_per_token, 'a');
  StreamResult result = RunStream(*stub, GreedyText(text, 1));
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(result.status.error_message().find("no token spans more than"), std::string::npos)
      << result.status.error_message();
  // A text under the bound is encoded and refused by its token count.
  std::string words;
  while (words.size() < 2400) words += "a ";
  absl::StatusOr<std::vector<int32_t>> ids = server_->tokenizer()->EncodePrompt(words);
  ASSERT_TRUE(ids.ok());
  ASSERT_GT(ids->size(), 1024u);
  ASSERT_LT(words.size(), 1023 * bytes_per_token);
  result = RunStream(*stub, GreedyText(words, 1));
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(result.status.error_message().find("tokens; the context holds"), std::string::npos)
      << result.status.error_message();
}

// Eight 4 MB prompts in flight leave short calls served. No timing is
// asserted (benchmarks live apart); the figures go to the log.
TEST_F(FrontDoorTest, HugePromptsLeaveShortCallsServed) {
  // gRPC's default limit on a received message is 4 MiB.
  const std::string text((4 << 20) - 1024, 'a');
  std::vector<std::thread> big;
  for (int i = 0; i < 8; ++i) {
    big.emplace_back([&] {
      StreamResult result = RunStream(*NewStub(server_->address()), GreedyText(text, 1));
      EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    });
  }
  const auto start = std::chrono::steady_clock::now();
  StreamResult small = RunStream(*NewStub(server_->address()), GreedyText("Hello", 4));
  const double small_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(small.status.ok()) << small.status.error_message();
  EXPECT_EQ(small.ids.size(), 4u);
  for (std::thread& t : big) t.join();
  std::printf("short request beside 8 x 4 MB prompts: %.1f ms\n", small_ms);
}

TEST_F(FrontDoorTest, ReflectionV1ListsAndDescribes) {
  grpc::reflection::v1::ServerReflectionRequest request;
  request.set_list_services("");
  grpc::reflection::v1::ServerReflectionResponse response;
  auto channel = Connect(server_->address());
  auto stub = grpc::reflection::v1::ServerReflection::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->ServerReflectionInfo(&context);
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> names;
  for (const auto& service : response.list_services_response().service()) {
    names.push_back(service.name());
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "gemma.v1.Gemma"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.reflection.v1.ServerReflection"),
            names.end());

  request.set_file_containing_symbol("gemma.v1.Gemma");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_GT(response.file_descriptor_response().file_descriptor_proto_size(), 0);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(response.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.package(), "gemma.v1");

  request.set_file_containing_symbol("no.such.Symbol");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST(FrontDoorAuthTest, BearerSchemeIsCaseInsensitive) {
  ServerOptions options = TestServerOptions();
  options.ops.api_keys = {"secret-key"};
  std::unique_ptr<GemmaServer> server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->address());
  for (const std::string& header : {"Bearer secret-key", "bearer secret-key",
                                    "BEARER  secret-key", "Basic secret-key", "Bearersecret-key"}) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", header);
    v1::ModelInfo info;
    const grpc::Status status = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
    const bool bearer = header.substr(0, 7) != "Basic s" && header != "Bearersecret-key";
    EXPECT_EQ(status.ok(), bearer) << header << ": " << status.error_message();
  }
}

}  // namespace
}  // namespace gemma::server::testing
