// The real gemma-serve binary: SIGTERM drains (streams in flight complete,
// new calls get UNAVAILABLE, health NOT_SERVING, exit 0), and bad flags exit 2.
#include <signal.h>

#include <atomic>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

std::vector<std::string> ServeArgs(std::vector<std::string> extra, int port = 0) {
  std::vector<std::string> args = {kBinDir + "/gemma-serve", "--model", kModelDir, "--backend",
                                   "cpu", "--host", "127.0.0.1", "--port", std::to_string(port),
                                   "--threads", "1", "--max-context", "2048",
                                   // No /metrics: parallel tests would contend for its port.
                                   "--metrics-port", "-1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// "... listening on 127.0.0.1:PORT" -> "127.0.0.1:PORT".
std::string ListeningAddress(const std::string& line) {
  const std::string marker = "listening on ";
  const size_t at = line.find(marker);
  return at == std::string::npos ? "" : line.substr(at + marker.size());
}

TEST(DrainTest, SigtermFinishesStreamsRefusesNewCallsAndExitsZero) {
  Subprocess serve(ServeArgs({"--grace-period-s", "60"}));
  const std::string address =
      ListeningAddress(serve.WaitForLine("listening on", std::chrono::seconds(60)));
  ASSERT_FALSE(address.empty()) << serve.output();

  constexpr int kStreams = 4;
  constexpr int kTokens = 600;
  std::vector<StreamResult> results(kStreams);
  std::atomic<int> started{0};
  std::vector<std::thread> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.emplace_back([&, i] {
      auto stub = NewStub(address);
      grpc::ClientContext context;
      auto reader = stub->Generate(&context, GreedyText("Fortune " + std::to_string(i), kTokens));
      v1::GenerateResponse response;
      bool counted = false;
      while (reader->Read(&response)) {
        if (!counted) started.fetch_add(1);
        counted = true;
        results[i].ids.insert(results[i].ids.end(), response.token_ids().begin(),
                              response.token_ids().end());
        if (response.has_finish()) results[i].finish = response.finish();
      }
      if (!counted) started.fetch_add(1);
      results[i].status = reader->Finish();
    });
  }
  ASSERT_TRUE(Eventually([&] { return started.load() == kStreams; }, std::chrono::seconds(30)));
  serve.Signal(SIGTERM);
  ASSERT_FALSE(serve.WaitForLine("refusing new calls", std::chrono::seconds(10)).empty())
      << serve.output();

  // While the four streams run on, the server refuses new work.
  auto stub = NewStub(address);
  StreamResult refused = RunStream(*stub, GreedyText("New call", 4), std::chrono::seconds(10));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.status.error_message();
  auto health = grpc::health::v1::Health::NewStub(Connect(address));
  grpc::ClientContext health_context;
  grpc::health::v1::HealthCheckResponse health_response;
  grpc::Status health_status =
      health->Check(&health_context, grpc::health::v1::HealthCheckRequest(), &health_response);
  if (health_status.ok()) {
    EXPECT_EQ(health_response.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  } else {
    EXPECT_EQ(health_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  }

  for (std::thread& t : streams) t.join();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(results[i].status.ok()) << results[i].status.error_message();
    EXPECT_EQ(results[i].ids.size(), static_cast<size_t>(kTokens));
    EXPECT_EQ(results[i].finish.reason(), v1::FINISH_REASON_LENGTH);
  }
  EXPECT_EQ(serve.Wait(std::chrono::seconds(30)), 0) << serve.output();
}

TEST(DrainTest, GracePeriodCancelsWhatOutlivesIt) {
  Subprocess serve(ServeArgs({"--grace-period-s", "0.2"}));
  const std::string address =
      ListeningAddress(serve.WaitForLine("listening on", std::chrono::seconds(60)));
  ASSERT_FALSE(address.empty()) << serve.output();
  auto stub = NewStub(address);
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, GreedyText("Fortune", 2000));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  serve.Signal(SIGTERM);
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  while (reader->Read(&response)) {
    if (response.has_finish()) reason = response.finish().reason();
  }
  reader->Finish();
  EXPECT_EQ(reason, v1::FINISH_REASON_CANCELLED);
  EXPECT_EQ(serve.Wait(std::chrono::seconds(30)), 0) << serve.output();
}

TEST(FlagsTest, BadFlagsExitTwoWithAMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string mention;
  };
  const std::vector<Case> cases = {
      {{"--port", "70000"}, "--port"},
      {{"--backend", "tpu"}, "--backend"},
      {{"--model", "/no/such/dir"}, "--model"},
      {{"--max-concurrent-sequences", "0"}, "--max-concurrent-sequences"},
      {{"--grace-period-s", "-1"}, "--grace-period-s"},
      {{"--no-such-flag"}, "--no-such-flag"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {kBinDir + "/gemma-serve"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    int exit_code = -1;
    const std::string output = RunCommand(argv, &exit_code);
    EXPECT_EQ(exit_code, 2) << c.args[0] << ": " << output;
    EXPECT_NE(output.find(c.mention), std::string::npos) << output;
  }
  int exit_code = -1;
  const std::string help = RunCommand({kBinDir + "/gemma-serve", "--help"}, &exit_code);
  EXPECT_EQ(exit_code, 0);
  EXPECT_NE(help.find("--grace-period-s"), std::string::npos);
}

TEST(FlagsTest, BusyPortExitsOneInsteadOfSharingIt) {
  std::unique_ptr<GemmaServer> first = StartTestServer();
  ASSERT_NE(first, nullptr);
  int exit_code = -1;
  const std::string output = RunCommand(
      ServeArgs({}, first->port()), &exit_code);
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_NE(output.find("cannot listen"), std::string::npos) << output;
}

}  // namespace
}  // namespace gemma::server::testing
