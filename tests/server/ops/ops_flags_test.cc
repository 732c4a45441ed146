// gemma-serve's operations flags, through the real binary: bad values exit 2
// naming the flag; a metrics port asked for but busy exits 1.
#include <gtest/gtest.h>

#include <csignal>

#include "tests/server/server_test_util.h"

namespace gemma::server::testing {
namespace {

std::vector<std::string> Serve(std::vector<std::string> extra) {
  std::vector<std::string> argv = {kBinDir + "/gemma-serve",
                                   "--model",
                                   kModelDir,
                                   "--backend",
                                   "cpu",
                                   "--host",
                                   "127.0.0.1",
                                   "--port",
                                   "0",
                                   "--threads",
                                   "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

TEST(OpsFlagsTest, BadValuesExit2NamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"}, "--tls-cert"},
      {{"--tls-cert", "/nonexistent.pem"}, "--tls-key"},
      {{"--tls-client-ca", "/nonexistent.pem"}, "--tls-client-ca"},
      {{"--api-key-file", "/nonexistent-keys"}, "--api-key-file"},
      {{"--api-key", ""}, "--api-key"},
      {{"--metrics-port", "-2"}, "--metrics-port"},
      {{"--max-total-tokens", "-1"}, "--max-total-tokens"},
      {{"--max-total-tokens", "1"}, "--max-total-tokens"},
      {{"--max-total-tokens", "x"}, "--max-total-tokens"},
      {{"--log-format", "xml"}, "--log-format"},
      {{"--kv-block-size", "24"}, "--kv-block-size"},
      {{"--kv-block-size", "-16"}, "--kv-block-size"},
      {{"--kv-block-size", "0"}, "--kv-block-size"},
      {{"--num-kv-blocks", "-1"}, "--num-kv-blocks"},
      {{"--max-tokens-per-step", "-1"}, "--max-tokens-per-step"},
      {{"--gpu-memory-utilization", "0"}, "--gpu-memory-utilization"},
      {{"--gpu-memory-utilization", "1.5"}, "--gpu-memory-utilization"},
      {{"--gpu-memory-utilization", "half"}, "--gpu-memory-utilization"},
      {{"--weights", "fp4"}, "--weights"},
      {{"--lm-head", "fp16"}, "--lm-head"},
      {{"--weights", "bf16", "--lm-head", "fp8"}, "--lm-head fp8 needs --weights fp8"},
      {{"--grace-period-s", "nan"}, "--grace-period-s"},
      {{"--request-timeout-s", "nan"}, "--request-timeout-s"},
      {{"--request-timeout-s", "-1"}, "--request-timeout-s"},
  };
  for (const auto& [flags, named] : cases) {
    SCOPED_TRACE(named);
    int exit_code = -1;
    const std::string output = RunCommand(Serve(flags), &exit_code);
    EXPECT_EQ(exit_code, 2) << output;
    EXPECT_NE(output.find(named), std::string::npos) << output;
  }
}

// A cpu KV cache larger than the machine's memory is refused at start-up,
// naming the flag that sized it, instead of an abort or the OOM killer.
TEST(OpsFlagsTest, CpuKvCacheLargerThanTheMachineIsRefused) {
  for (const auto& [flags, named] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--num-kv-blocks", "1073741824"}, "--num-kv-blocks 1073741824"}}) {  // 140 TB: no machine holds it
    SCOPED_TRACE(named);
    int exit_code = -1;
    const std::string output = RunCommand(Serve(flags), &exit_code);
    EXPECT_EQ(exit_code, 1) << output;
    EXPECT_NE(output.find(named), std::string::npos) << output;
    EXPECT_NE(output.find("more than this machine's"), std::string::npos) << output;
  }
}

// Without --max-tokens-per-step the step budget is the backend's default
// (the cpu backend's 512), and the log says so.
TEST(OpsFlagsTest, DefaultStepBudgetFollowsTheBackend) {
  Subprocess server(Serve({}));
  const std::string line = server.WaitForLine("max tokens per step: ", std::chrono::seconds(60));
  EXPECT_NE(line.find("max tokens per step: 512 "), std::string::npos) << line;
}

TEST(OpsFlagsTest, BusyMetricsPortAskedForExits1) {
  Subprocess first(Serve({"--metrics-port", "0"}));
  const std::string line = first.WaitForLine("metrics on http://", std::chrono::seconds(60));
  ASSERT_FALSE(line.empty()) << first.output();
  const std::string port =
      line.substr(line.rfind(':') + 1, line.find("/metrics") - line.rfind(':') - 1);
  int exit_code = -1;
  const std::string output = RunCommand(Serve({"--metrics-port", port}), &exit_code);
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_NE(output.find("--metrics-port"), std::string::npos) << output;
  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait(std::chrono::seconds(60)), 0) << first.output();
}

}  // namespace
}  // namespace gemma::server::testing
