// gemma-cli against an in-process server: output and exit codes (0 ok,
// 1 RPC error with the message, 2 bad flags).
#include <sstream>

#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartTestServer().release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
  // Runs gemma-cli --addr <server> args...; returns its output.
  static std::string Cli(std::vector<std::string> args, int* exit_code) {
    std::vector<std::string> argv = {kBinDir + "/gemma-cli", "--addr", server_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, exit_code);
  }
  static GemmaServer* server_;
};
GemmaServer* CliTest::server_ = nullptr;

TEST_F(CliTest, GenerateStreamsTheGreedyText) {
  const GoldenPrompt golden = LoadGolden()[0];
  int code = -1;
  const std::string out = Cli({"generate", golden.text, "--max-tokens", "40", "--greedy",
                               "--ignore-eos", "--print-ids", "-v"},
                              &code);
  ASSERT_EQ(code, 0) << out;
  const size_t at = out.find("ids:");
  ASSERT_NE(at, std::string::npos) << out;
  std::istringstream words(out.substr(at + 4));
  std::vector<int32_t> ids;
  for (int32_t id; ids.size() < golden.greedy.size() && words >> id;) ids.push_back(id);
  const size_t trusted = TrustedPrefix(golden);
  ASSERT_GE(ids.size(), trusted);
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + trusted),
            std::vector<int32_t>(golden.greedy.begin(), golden.greedy.begin() + trusted));
  EXPECT_NE(out.find("FINISH_REASON_LENGTH"), std::string::npos) << out;
  EXPECT_NE(out.find("It's a lot of basket"), std::string::npos) << out;
}

TEST_F(CliTest, HealthInfoAndTokenize) {
  int code = -1;
  std::string out = Cli({"health"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("SERVING"), std::string::npos) << out;
  out = Cli({"health", "--service", "gemma.v1.Gemma"}, &code);
  EXPECT_EQ(code, 0) << out;
  out = Cli({"info"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("gemma4-fortunes"), std::string::npos) << out;
  out = Cli({"tokenize", "The quick brown fox", "--add-bos"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("<bos>"), std::string::npos) << out;
}

TEST_F(CliTest, ExitCodes) {
  int code = -1;
  std::string out = Cli({"generate", "x", "--top-p", "1.5"}, &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("INVALID_ARGUMENT"), std::string::npos) << out;
  EXPECT_NE(out.find("top_p"), std::string::npos) << out;
  out = Cli({"generate", "x", "--max-tokens", "lots"}, &code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("--max-tokens"), std::string::npos) << out;
  out = Cli({"frobnicate"}, &code);
  EXPECT_EQ(code, 2) << out;
  out = Cli({"generate"}, &code);
  EXPECT_EQ(code, 2) << out;
  out = RunCommand({kBinDir + "/gemma-cli", "--addr", "127.0.0.1:1", "--timeout-s", "5", "info"},
                   &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("UNAVAILABLE"), std::string::npos) << out;
}

}  // namespace
}  // namespace gemma::server::testing
