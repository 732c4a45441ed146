// gemma-serve's operations features over real gRPC on loopback (in-process
// server, CPU backend, fortunes model): API keys, limits, GetServerStatus.
#include <gtest/gtest.h>

#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

constexpr char kKey[] = "test-key-1";

class ClientWithKey {
 public:
  ClientWithKey(const std::string& address, std::string key)
      : stub_(NewStub(address)), key_(std::move(key)) {}
  grpc::Status Info() {
    grpc::ClientContext context;
    if (!key_.empty()) context.AddMetadata("authorization", key_);
    v1::ModelInfo info;
    return stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
  }

 private:
  std::unique_ptr<v1::Gemma::Stub> stub_;
  std::string key_;
};

TEST(OpsAuthTest, KeysAreRequiredExceptForHealth) {
  ServerOptions options = TestServerOptions();
  options.ops.api_keys = {kKey, "other-key"};
  auto server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  const std::string address = server->address();
  EXPECT_TRUE(ClientWithKey(address, std::string("Bearer ") + kKey).Info().ok());
  EXPECT_TRUE(ClientWithKey(address, "Bearer other-key").Info().ok());
  for (const std::string& header : {std::string(), std::string("Bearer wrong"), std::string(kKey),
                                    std::string("Basic ") + kKey}) {
    SCOPED_TRACE(header);
    const grpc::Status status = ClientWithKey(address, header).Info();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  }
  // Generate too, and the error names what is missing.
  auto stub = NewStub(address);
  StreamResult result = RunStream(*stub, GreedyText("Love is", 4));
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(result.status.error_message().find("authorization"), std::string::npos);
  // Health needs no key.
  auto health = grpc::health::v1::Health::NewStub(Connect(address));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse response;
  EXPECT_TRUE(health->Check(&context, grpc::health::v1::HealthCheckRequest(), &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST(OpsLimitsTest, PromptAndTotalTokens) {
  ServerOptions options = TestServerOptions();
  options.ops.limits.max_prompt_tokens = 8;
  options.ops.limits.max_total_tokens = 16;
  auto server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->address());
  EXPECT_TRUE(RunStream(*stub, GreedyText("Love is", 4)).status.ok());
  StreamResult long_prompt = RunStream(
      *stub, GreedyText("The quick brown fox jumps over the lazy dog and runs far away", 4));
  EXPECT_EQ(long_prompt.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(long_prompt.status.error_message().find("--max-prompt-tokens"), std::string::npos)
      << long_prompt.status.error_message();
  StreamResult too_long = RunStream(*stub, GreedyText("Love is", 15));
  EXPECT_EQ(too_long.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(too_long.status.error_message().find("--max-total-tokens"), std::string::npos)
      << too_long.status.error_message();
  // Unset max_tokens: what is left under the limit.
  v1::GenerateRequest unset = GreedyText("Love is", 1);
  unset.mutable_stopping()->clear_max_tokens();
  StreamResult lowered = RunStream(*stub, unset);
  ASSERT_TRUE(lowered.status.ok()) << lowered.status.error_message();
  EXPECT_EQ(lowered.finish.usage().prompt_tokens() + lowered.finish.usage().completion_tokens(),
            16);
}

TEST(OpsLimitsTest, MessageSizeIsEnforcedByGrpc) {
  ServerOptions options = TestServerOptions();
  options.ops.max_message_bytes = 1024;
  auto server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->address());
  StreamResult big = RunStream(*stub, GreedyText(std::string(4096, 'a'), 4));
  EXPECT_EQ(big.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << big.status.error_message();
  EXPECT_TRUE(RunStream(*stub, GreedyText("Love is", 4)).status.ok());
}

TEST(OpsLimitsTest, RequestTimeoutEndsWithDeadlineExceeded) {
  ServerOptions options = TestServerOptions();
  options.ops.request_timeout_s = 0.2;
  auto server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->address());
  StreamResult result = RunStream(*stub, GreedyText("Love is", 1000));
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << result.status.error_message();
  EXPECT_NE(result.status.error_message().find("--request-timeout-s"), std::string::npos);
  EXPECT_LT(result.ids.size(), 1000u);
  EXPECT_TRUE(RunStream(*stub, GreedyText("Love is", 4)).status.ok());
  // The slot and its KV came back.
  EXPECT_TRUE(
      Eventually([&] { return server->engine()->Stats().running == 0; }, std::chrono::seconds(10)));
}

TEST(OpsLimitsTest, StreamsBeyondTheCapAreRefusedAtOnce) {
  ServerOptions options = TestServerOptions();
  options.ops.max_concurrent_streams = 2;
  auto server = StartTestServer(options);
  ASSERT_NE(server, nullptr);
  const std::string address = server->address();
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::thread> streams;
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    grpc::ClientContext* context = contexts.back().get();
    streams.emplace_back([address, context] {
      auto stub = NewStub(address);
      auto reader = stub->Generate(context, GreedyText("Love is", 1000));
      v1::GenerateResponse response;
      while (reader->Read(&response)) {
      }
      reader->Finish();
    });
  }
  ASSERT_TRUE(
      Eventually([&] { return server->engine()->Stats().running == 2; }, std::chrono::seconds(20)));
  auto stub = NewStub(address);
  const auto started = std::chrono::steady_clock::now();
  StreamResult third = RunStream(*stub, GreedyText("Love is", 4));
  EXPECT_EQ(third.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(third.status.error_message().find("--max-concurrent-streams"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  for (auto& context : contexts) context->TryCancel();
  for (auto& stream : streams) stream.join();
  ASSERT_TRUE(
      Eventually([&] { return server->engine()->Stats().running == 0; }, std::chrono::seconds(10)));
  EXPECT_TRUE(RunStream(*stub, GreedyText("Love is", 4)).status.ok());
}

TEST(OpsStatusTest, GetServerStatusReportsLoadAndAFullPoolWhenIdle) {
  auto server = StartTestServer();
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->address());
  ASSERT_TRUE(RunStream(*stub, GreedyText("Love is", 6)).status.ok());
  v1::ServerStatus status;
  // The engine publishes its figures after the step that sent the last token.
  ASSERT_TRUE(Eventually(
      [&] {
        grpc::ClientContext context;
        return stub->GetServerStatus(&context, v1::GetServerStatusRequest(), &status).ok() &&
               status.num_requests_running() == 0;
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(status.num_requests_waiting(), 0);
  EXPECT_GT(status.kv_total_blocks(), 0);
  EXPECT_EQ(status.kv_free_blocks(), status.kv_total_blocks());
  EXPECT_EQ(status.kv_cache_usage(), 0.0);
  EXPECT_EQ(status.generated_tokens(), 6);
  EXPECT_EQ(status.max_batch(), TestServerOptions().backend.max_slots);
  EXPECT_GE(status.prefix_cache_queries(), status.prefix_cache_hits());
}

}  // namespace
}  // namespace gemma::server::testing
