// Unit tests of server/ops without a server: the Prometheus registry, the
// token limits, API-key loading, the JSON log formatter and ServerMetrics.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "nlohmann/json.hpp"
#include "server/ops/auth.h"
#include "server/ops/json_log.h"
#include "server/ops/limits.h"
#include "server/ops/metrics.h"
#include "server/ops/server_metrics.h"
#include "spdlog/details/log_msg.h"

namespace gemma::server::ops {
namespace {

using Type = MetricsRegistry::Type;

TEST(MetricsRegistryTest, RendersCountersGaugesAndLabelsEscaped) {
  MetricsRegistry r;
  r.AddFamily("x_total", Type::kCounter, "Things.", {"kind"});
  r.AddFamily("y", Type::kGauge, "Level.");
  r.GetCounter("x_total", {"a\"b\\c\nd"}).Inc(2);
  r.GetGauge("y").Set(0.5);
  const std::string text = r.Render();
  EXPECT_NE(text.find("# TYPE x_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_total{kind=\"a\\\"b\\\\c\\nd\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("y 0.5\n"), std::string::npos) << text;
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulative) {
  MetricsRegistry r;
  r.AddFamily("h", Type::kHistogram, "Sizes.", {}, {1, 2, 4});
  Histogram& h = r.GetHistogram("h");
  for (double v : {0.5, 1.0, 3.0, 100.0}) h.Observe(v);
  const std::string text = r.Render();
  EXPECT_NE(text.find("h_bucket{le=\"1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_bucket{le=\"2\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_bucket{le=\"4\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_sum 104.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_count 4\n"), std::string::npos) << text;
}

TEST(MetricsRegistryTest, WrongLabelsAreAProgrammingError) {
  MetricsRegistry r;
  r.AddFamily("x_total", Type::kCounter, "Things.", {"kind"});
  EXPECT_THROW(r.GetCounter("x_total"), std::logic_error);
  EXPECT_THROW(r.GetGauge("x_total", {"a"}), std::logic_error);
}

TEST(ServerMetricsTest, PrefixCacheHitRateIsHitsOverQueries) {
  ServerMetrics metrics;
  EngineStats stats;
  EXPECT_NE(metrics.Render(stats, std::nullopt).find("\ngemma_prefix_cache_hit_rate 0\n"),
            std::string::npos);
  stats.prefix_cache_queries = 400;
  stats.prefix_cache_hits = 100;
  const std::string text = metrics.Render(stats, std::nullopt);
  EXPECT_NE(text.find("# TYPE gemma_prefix_cache_hit_rate gauge\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ngemma_prefix_cache_hit_rate 0.25\n"), std::string::npos) << text;
}

// The engine's token budget enforces them (tests/engine/core/token_budget_test).
TEST(RequestLimitsTest, ReachTheEngineAsOptions) {
  EngineOptions options;
  ApplyRequestLimits(RequestLimits{.max_prompt_tokens = 10, .max_total_tokens = 20}, &options);
  EXPECT_EQ(options.max_prompt_tokens, 10);
  EXPECT_EQ(options.max_total_tokens, 20);
}

TEST(ApiKeysTest, FlagsAndFile) {
  const std::string path = ::testing::TempDir() + "/ops_keys.txt";
  std::ofstream(path) << "# comment\n\n  key-b  \nkey-c\n";
  absl::StatusOr<std::vector<std::string>> keys = LoadApiKeys({"key-a"}, path);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(*keys, (std::vector<std::string>{"key-a", "key-b", "key-c"}));
  EXPECT_NE(LoadApiKeys({}, path + ".missing").status().message().find("--api-key-file"),
            std::string::npos);
  EXPECT_NE(LoadApiKeys({" "}, "").status().message().find("--api-key"), std::string::npos);
  std::remove(path.c_str());
}

std::string FormatJson(const std::string& message) {
  spdlog::details::log_msg msg(spdlog::source_loc{}, "", spdlog::level::info, message);
  spdlog::memory_buf_t out;
  JsonLogFormatter().format(msg, out);
  return std::string(out.data(), out.size());
}

TEST(JsonLogTest, OneObjectPerLineWithRequestId) {
  const std::string line = FormatJson("request req-7 tokens_in=3 \"quoted\"");
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const nlohmann::json json = nlohmann::json::parse(line);
  EXPECT_EQ(json["level"], "info");
  EXPECT_EQ(json["request_id"], "req-7");
  EXPECT_EQ(json["msg"], "request req-7 tokens_in=3 \"quoted\"");
  EXPECT_TRUE(json["ts"].get<std::string>().ends_with("Z"));
  EXPECT_FALSE(nlohmann::json::parse(FormatJson("listening on x")).contains("request_id"));
  // Invalid UTF-8 from a caller never breaks the line.
  EXPECT_NO_THROW(nlohmann::json::parse(FormatJson("request \xff\xfe bad")));
}

}  // namespace
}  // namespace gemma::server::ops
