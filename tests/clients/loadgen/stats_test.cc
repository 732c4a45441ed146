#include "clients/loadgen/stats.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "gtest/gtest.h"

namespace gemma::loadgen {
namespace {

RequestResult Completed(int output_tokens, double ttft_ms, double e2e_ms,
                        std::vector<double> itl_ms, int prompt_tokens = 16) {
  RequestResult r;
  r.ok = true;
  r.error_code = "OK";
  r.output_tokens = output_tokens;
  r.prompt_tokens = prompt_tokens;
  r.ttft_ms = ttft_ms;
  r.e2e_ms = e2e_ms;
  r.itl_ms = std::move(itl_ms);
  return r;
}

RequestResult Failed(const std::string& code) {
  RequestResult r;
  r.error_code = code;
  r.e2e_ms = 5;
  return r;
}

TEST(PercentileTest, MatchesLinearInterpolationOnOneToTen) {
  // numpy.percentile([1..10], [50, 90, 99]) = 5.5, 9.1, 9.91.
  std::vector<double> values = {7, 3, 10, 1, 9, 2, 8, 4, 6, 5};
  EXPECT_DOUBLE_EQ(Percentile(values, 50), 5.5);
  EXPECT_DOUBLE_EQ(Percentile(values, 90), 9.1);
  EXPECT_NEAR(Percentile(values, 99), 9.91, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile(values, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(values, 100), 10);
}

TEST(PercentileTest, EmptyAndSingleValue) {
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_EQ(Percentile({42}, 0), 42);
  EXPECT_EQ(Percentile({42}, 99), 42);
}

TEST(PercentileTest, IntegerRanksOfAShuffledRangeAreExact) {
  // 0..100 shuffled: the p-th percentile is p itself (rank p of 100).
  std::vector<double> values(101);
  std::iota(values.begin(), values.end(), 0.0);
  std::shuffle(values.begin(), values.end(), std::mt19937_64(7));
  for (double p : {0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 100.0}) {
    EXPECT_DOUBLE_EQ(Percentile(values, p), p) << p;
  }
  EXPECT_DOUBLE_EQ(Percentile(values, 12.5), 12.5);
}

TEST(SummarizeTest, MeanAndPercentiles) {
  const Distribution d = Summarize({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_EQ(d.count, 8u);
  EXPECT_DOUBLE_EQ(d.mean, 5.0);
  EXPECT_DOUBLE_EQ(d.p50, 4.5);                 // rank 3.5 between 4 and 5
  EXPECT_NEAR(d.p90, 7 + 0.3 * (9 - 7), 1e-12);  // rank 6.3
  EXPECT_NEAR(d.p99, 7 + 0.93 * (9 - 7), 1e-12); // rank 6.93
  const Distribution empty = Summarize({});
  EXPECT_EQ(empty.count, 0u);
  EXPECT_EQ(empty.mean, 0);
  EXPECT_EQ(empty.p99, 0);
}

TEST(ComputeMetricsTest, CountsThroughputsAndLatencies) {
  const std::vector<RequestResult> results = {
      Completed(5, 100, 180, {20, 20, 20, 20}),  // TPOT (180 - 100) / 4 = 20
      Completed(3, 50, 110, {40, 20}, 8),        // TPOT (110 - 50) / 2 = 30
      Completed(1, 70, 75, {}),                  // one token: no TPOT sample
      Failed("UNAVAILABLE"),
      Failed("UNAVAILABLE"),
      Failed("DEADLINE_EXCEEDED"),
  };
  const BenchmarkMetrics m = ComputeMetrics(results, 2.0);
  EXPECT_EQ(m.num_completed, 3);
  EXPECT_EQ(m.num_failed, 3);
  EXPECT_EQ(m.failures_by_code.at("UNAVAILABLE"), 2);
  EXPECT_EQ(m.failures_by_code.at("DEADLINE_EXCEEDED"), 1);
  EXPECT_EQ(m.total_input_tokens, 16 + 8 + 16);
  EXPECT_EQ(m.total_output_tokens, 9);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.output_token_throughput, 4.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, (40 + 9) / 2.0);

  EXPECT_EQ(m.ttft_ms.count, 3u);
  EXPECT_DOUBLE_EQ(m.ttft_ms.mean, (100 + 50 + 70) / 3.0);
  EXPECT_DOUBLE_EQ(m.ttft_ms.p50, 70);
  EXPECT_EQ(m.tpot_ms.count, 2u);
  EXPECT_DOUBLE_EQ(m.tpot_ms.mean, 25);
  EXPECT_DOUBLE_EQ(m.tpot_ms.p90, 20 + 0.9 * 10);
  EXPECT_EQ(m.itl_ms.count, 6u);
  EXPECT_DOUBLE_EQ(m.itl_ms.mean, 140.0 / 6);
  EXPECT_DOUBLE_EQ(m.itl_ms.p50, 20);
  EXPECT_EQ(m.e2e_ms.count, 3u);  // failed requests are not latencies
  EXPECT_DOUBLE_EQ(m.e2e_ms.p50, 110);
}

TEST(ComputeMetricsTest, ZeroDurationGivesZeroThroughput) {
  const BenchmarkMetrics m = ComputeMetrics({Completed(2, 1, 2, {1})}, 0);
  EXPECT_EQ(m.request_throughput, 0);
  EXPECT_EQ(m.output_token_throughput, 0);
}

}  // namespace
}  // namespace gemma::loadgen
