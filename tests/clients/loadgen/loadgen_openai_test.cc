// gemma-loadgen --protocol openai: the runner drives streaming
// /v1/completions of the in-process server's HTTP front over loopback, and
// its results agree with the gRPC protocol's for the same workload.
#include <string>
#include <vector>

#include "clients/loadgen/flags.h"
#include "clients/loadgen/runner.h"
#include "clients/loadgen/stats.h"
#include "clients/loadgen/workload.h"
#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace gemma::loadgen {
namespace {

LoadgenOptions OpenAiOptions(const server::GemmaServer& server) {
  LoadgenOptions options;
  options.protocol = Protocol::kOpenAi;
  options.addr = server.address();
  options.http_addr = "127.0.0.1:" + std::to_string(server.http_port());
  options.input_len = 16;
  options.output_len = 8;
  options.ignore_eos = true;
  options.seed = 1;
  return options;
}

std::unique_ptr<server::GemmaServer> StartWithHttp(std::vector<std::string> api_keys = {}) {
  server::ServerOptions options = server::testing::TestServerOptions();
  options.http_port = 0;
  options.ops.api_keys = std::move(api_keys);
  return server::testing::StartTestServer(options);
}

TEST(LoadgenOpenAiTest, FlagsSelectTheProtocol) {
  const char* argv[] = {"gemma-loadgen", "--protocol", "openai", "--http-addr", "10.0.0.1:9000"};
  ParsedOptions parsed = ParseLoadgenFlags(5, const_cast<char**>(argv));
  ASSERT_TRUE(parsed.options);
  EXPECT_EQ(parsed.options->protocol, Protocol::kOpenAi);
  EXPECT_EQ(parsed.options->http_addr, "10.0.0.1:9000");
  const char* bad[] = {"gemma-loadgen", "--protocol", "smtp"};
  EXPECT_EQ(ParseLoadgenFlags(3, const_cast<char**>(bad)).exit_code, 2);
}

TEST(LoadgenOpenAiTest, StreamsCompletionsAndMeasuresEveryRequest) {
  std::unique_ptr<server::GemmaServer> server = StartWithHttp({"key-1"});
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->http_port(), 0);
  LoadgenOptions options = OpenAiOptions(*server);
  options.api_key = "key-1";
  LoadRunner runner(options);
  ModelLimits limits;
  std::string error;
  ASSERT_TRUE(runner.FetchModelLimits(&limits, &error)) << error;
  ASSERT_EQ(CheckWorkloadFits(options, limits), "");
  const int num = 6;
  const std::vector<RequestSpec> specs = BuildWorkload(options, limits, num, options.seed);
  const RunOutcome outcome = runner.Run(specs, std::vector<double>(num, 0.0), /*max_in_flight=*/3);
  ASSERT_EQ(outcome.results.size(), static_cast<size_t>(num));
  for (const RequestResult& result : outcome.results) {
    EXPECT_TRUE(result.ok) << result.error_code << ": " << result.error_message;
    EXPECT_EQ(result.prompt_tokens, 16);
    EXPECT_EQ(result.output_tokens, 8);
    EXPECT_GT(result.ttft_ms, 0);
    EXPECT_GE(result.e2e_ms, result.ttft_ms);
    EXPECT_EQ(result.itl_ms.size(), 7u);
  }
  const BenchmarkMetrics metrics = ComputeMetrics(outcome.results, outcome.duration_s);
  EXPECT_EQ(metrics.num_failed, 0);
}

TEST(LoadgenOpenAiTest, RefusalsAreReportedAsFailures) {
  std::unique_ptr<server::GemmaServer> server = StartWithHttp({"key-1"});
  ASSERT_NE(server, nullptr);
  LoadgenOptions options = OpenAiOptions(*server);
  options.api_key = "key-1";
  LoadRunner runner(options);
  ModelLimits limits;
  std::string error;
  ASSERT_TRUE(runner.FetchModelLimits(&limits, &error)) << error;
  std::vector<RequestSpec> specs = BuildWorkload(options, limits, 1, options.seed);
  specs[0].prompt_ids[1] = limits.vocab_size + 5;  // outside the vocabulary
  const RunOutcome outcome = runner.Run(specs, {0.0}, 1);
  ASSERT_EQ(outcome.results.size(), 1u);
  EXPECT_FALSE(outcome.results[0].ok);
  EXPECT_EQ(outcome.results[0].error_code, "HTTP_400") << outcome.results[0].error_message;
}

}  // namespace
}  // namespace gemma::loadgen
