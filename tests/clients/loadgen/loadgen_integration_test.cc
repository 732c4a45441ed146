// gemma-loadgen end to end: a gemma-serve subprocess on a free port (CPU
// backend, fortunes model) and gemma-loadgen against it, checked through the
// JSON it writes.
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/server_test_util.h"

namespace gemma::loadgen {
namespace {

using server::testing::kBinDir;
using server::testing::kModelDir;
using server::testing::RunCommand;
using server::testing::Subprocess;

// "... listening on 127.0.0.1:43210" -> "127.0.0.1:43210".
std::string AddressFromLine(const std::string& line) {
  const std::string marker = "listening on ";
  const size_t at = line.find(marker);
  if (at == std::string::npos) return "";
  std::string address = line.substr(at + marker.size());
  while (!address.empty() && std::isspace(static_cast<unsigned char>(address.back()))) {
    address.pop_back();
  }
  return address;
}

void ExpectOrderedPositive(const nlohmann::json& d, const std::string& name) {
  SCOPED_TRACE(name);
  const double p50 = d.at("p50"), p90 = d.at("p90"), p99 = d.at("p99");
  EXPECT_GT(d.at("count").get<int>(), 0);
  EXPECT_GT(d.at("mean").get<double>(), 0);
  EXPECT_GT(p50, 0);
  EXPECT_LE(p50, p90);
  EXPECT_LE(p90, p99);
}

TEST(LoadgenIntegrationTest, FixedConcurrencyRunReportsEveryRequest) {
  Subprocess serve({kBinDir + "/gemma-serve", "--model", kModelDir, "--backend", "cpu",
                    "--host", "127.0.0.1", "--port", "0", "--threads", "1",
                    "--max-concurrent-sequences", "8"});
  const std::string address =
      AddressFromLine(serve.WaitForLine("listening on", std::chrono::seconds(120)));
  ASSERT_FALSE(address.empty()) << serve.output();

  const std::string json_path =
      ::testing::TempDir() + "/loadgen_result_" + std::to_string(getpid()) + ".json";
  int exit_code = -1;
  const std::string output = RunCommand(
      {kBinDir + "/gemma-loadgen", "--addr", address, "--concurrency", "4", "--num-requests",
       "12", "--input-len", "16", "--output-len", "8", "--ignore-eos", "--seed", "1",
       "--json", json_path},
      &exit_code);
  ASSERT_EQ(exit_code, 0) << output;
  EXPECT_NE(output.find("Successful requests:"), std::string::npos) << output;

  std::ifstream file(json_path);
  ASSERT_TRUE(file.good()) << json_path;
  const nlohmann::json result = nlohmann::json::parse(file);
  std::remove(json_path.c_str());
  EXPECT_EQ(result.at("completed").get<int>(), 12) << result.dump(2);
  EXPECT_EQ(result.at("failed").get<int>(), 0) << result.dump(2);
  EXPECT_EQ(result.at("total_output_tokens").get<int>(), 96);
  EXPECT_EQ(result.at("total_input_tokens").get<int>(), 12 * 16);
  EXPECT_GT(result.at("duration_s").get<double>(), 0);
  EXPECT_GT(result.at("output_token_throughput").get<double>(), 0);
  for (const char* name : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    ExpectOrderedPositive(result.at(name), name);
  }
  EXPECT_EQ(result.at("itl_ms").at("count").get<int>(), 12 * 7);

  // The stdout's last line is the same result.
  const size_t end = output.find_last_not_of('\n');
  ASSERT_NE(end, std::string::npos);
  const size_t newline = output.rfind('\n', end);
  const size_t start = newline == std::string::npos ? 0 : newline + 1;
  const std::string last_line = output.substr(start, end + 1 - start);
  EXPECT_EQ(nlohmann::json::parse(last_line).at("completed"), 12) << last_line;
}

TEST(LoadgenIntegrationTest, UnreachableServerExitsWithOne) {
  int exit_code = -1;
  const std::string output = RunCommand(
      {kBinDir + "/gemma-loadgen", "--addr", "127.0.0.1:1", "--num-requests", "1"}, &exit_code);
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_NE(output.find("GetModelInfo"), std::string::npos) << output;
}

}  // namespace
}  // namespace gemma::loadgen
