// --tensor-parallel-size through the server: a gemma-serve whose CPU backend
// runs the fortunes model as 2 simulated ranks (the shards and the sums of
// the multi-GPU forward) gives the golden greedy tokens and the same tokens
// as one rank, for single and concurrent streams; the flag's refusals exit 2.
#include <thread>

#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

std::unique_ptr<GemmaServer> StartWithRanks(int ranks) {
  ServerOptions options = TestServerOptions();
  options.backend.tensor_parallel_size = ranks;
  return StartTestServer(options);
}

TEST(TensorParallelServerTest, GreedyTokensMatchGoldenAndOneRank) {
  std::unique_ptr<GemmaServer> one = StartWithRanks(1), two = StartWithRanks(2);
  ASSERT_TRUE(one && two);
  auto stub_one = NewStub(one->address()), stub_two = NewStub(two->address());
  const std::vector<GoldenPrompt> goldens = LoadGolden();
  // All prompts at once on the TP=2 server (batched decode over the ranks).
  std::vector<StreamResult> concurrent(goldens.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < goldens.size(); ++i)
    threads.emplace_back([&, i] {
      concurrent[i] = RunStream(*stub_two, GreedyText(goldens[i].text, static_cast<int>(goldens[i].greedy.size())));
    });
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < goldens.size(); ++i) {
    const GoldenPrompt& golden = goldens[i];
    SCOPED_TRACE(golden.text);
    const int max_tokens = static_cast<int>(golden.greedy.size());
    const StreamResult a = RunStream(*stub_one, GreedyText(golden.text, max_tokens));
    const StreamResult b = RunStream(*stub_two, GreedyText(golden.text, max_tokens));
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
    ASSERT_TRUE(b.status.ok()) << b.status.error_message();
    ASSERT_TRUE(concurrent[i].status.ok()) << concurrent[i].status.error_message();
    const size_t trusted = TrustedPrefix(golden);
    ASSERT_GE(b.ids.size(), trusted);
    EXPECT_EQ(std::vector<int32_t>(b.ids.begin(), b.ids.begin() + trusted),
              std::vector<int32_t>(golden.greedy.begin(), golden.greedy.begin() + trusted));
    EXPECT_EQ(b.ids, a.ids);
    EXPECT_EQ(b.text, a.text);
    EXPECT_EQ(concurrent[i].ids, a.ids);
  }
}

TEST(TensorParallelServerTest, FlagRefusalsExitWithCode2) {
  for (const char* bad : {"3", "8", "0", "two"}) {
    int exit_code = -1;
    const std::string out = RunCommand({kBinDir + "/gemma-serve", "--model", kModelDir, "--backend", "cpu",
                                        "--port", "0", "--http-port", "-1", "--tensor-parallel-size", bad},
                                       &exit_code);
    EXPECT_EQ(exit_code, 2) << bad << ": " << out;
    EXPECT_NE(out.find("--tensor-parallel-size"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace gemma::server::testing
