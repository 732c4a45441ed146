// The whole context through the server (real gRPC over loopback, CPU
// backend): prompt + output == max_context finishes with
// FINISH_REASON_LENGTH on the demo model and on the tiny one, with a KV pool
// of exactly one such sequence and two of them in flight; a request the pool
// can never hold is refused at once with INVALID_ARGUMENT.
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

constexpr int kMaxContext = 4096;  // both models' max_position_embeddings
constexpr int kBlockSize = 16;
constexpr int kMaxOutput = 8;

struct Model {
  std::string name;
  std::string dir;
  friend void PrintTo(const Model& m, std::ostream* os) { *os << m.name; }
};

v1::GenerateRequest IdsRequest(int num_prompt_tokens, int max_tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  v1::GenerateRequest request;
  auto* ids = request.mutable_tokens()->mutable_ids();
  ids->Add(2);  // bos
  for (int i = 1; i < num_prompt_tokens; ++i) ids->Add(3 + static_cast<int32_t>(rng() % 1000));
  request.mutable_sampling()->set_temperature(0.0f);
  request.mutable_stopping()->set_max_tokens(max_tokens);
  request.mutable_stopping()->set_ignore_eos(true);
  return request;
}

class FullContextServerTest : public ::testing::TestWithParam<Model> {
 protected:
  static ServerOptions Options(const std::string& model_dir, int num_kv_blocks) {
    ServerOptions options = TestServerOptions();
    options.backend.model_dir = model_dir;
    options.backend.max_slots = 2;
    options.backend.max_context = kMaxContext;
    options.backend.kv_block_size = kBlockSize;
    options.backend.num_kv_blocks = num_kv_blocks;
    options.backend.max_tokens_per_step = 512;
    return options;
  }
};

TEST_P(FullContextServerTest, PromptPlusOutputFillsTheContext) {
  auto server = StartTestServer(Options(GetParam().dir, kMaxContext / kBlockSize));
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->address());
  StreamResult results[2];
  std::thread second([&] { results[1] = RunStream(*stub, IdsRequest(kMaxContext - kMaxOutput, kMaxOutput, 2),
                                                  std::chrono::seconds(300)); });
  results[0] = RunStream(*stub, IdsRequest(kMaxContext - kMaxOutput, kMaxOutput, 1), std::chrono::seconds(300));
  second.join();
  for (const StreamResult& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    ASSERT_TRUE(r.has_finish);
    EXPECT_EQ(r.finish.reason(), v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(r.finish.usage().prompt_tokens() + r.finish.usage().completion_tokens(), kMaxContext);
    EXPECT_EQ(static_cast<int>(r.ids.size()), kMaxOutput);
  }
}

TEST_P(FullContextServerTest, RequestThePoolCanNeverHoldIsRefusedAtOnce) {
  // Half a context of blocks: a request within max_context but beyond the pool.
  auto server = StartTestServer(Options(GetParam().dir, kMaxContext / kBlockSize / 2));
  ASSERT_NE(server, nullptr);
  auto stub = NewStub(server->address());
  const StreamResult refused = RunStream(*stub, IdsRequest(3000, kMaxOutput, 3), std::chrono::seconds(30));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << refused.status.error_message();
  EXPECT_NE(refused.status.error_message().find("KV blocks; the pool has 128"), std::string::npos)
      << refused.status.error_message();
  EXPECT_FALSE(refused.has_finish);
  // What fits still runs.
  const StreamResult fits = RunStream(*stub, IdsRequest(2000, kMaxOutput, 4), std::chrono::seconds(120));
  ASSERT_TRUE(fits.status.ok()) << fits.status.error_message();
  EXPECT_EQ(fits.finish.reason(), v1::FINISH_REASON_LENGTH);
}

INSTANTIATE_TEST_SUITE_P(Models, FullContextServerTest,
                         ::testing::Values(Model{"fortunes", kModelDir},
                                           Model{"tiny_random", std::string(GEMMA_TEST_DATA) + "/gemma4-tiny-random"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace gemma::server::testing
