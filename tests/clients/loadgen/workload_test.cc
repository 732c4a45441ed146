#include "clients/loadgen/workload.h"

#include <cmath>
#include <limits>
#include <numeric>

#include "gtest/gtest.h"

namespace gemma::loadgen {
namespace {

TEST(PoissonArrivalsTest, MeanGapIsOneOverRate) {
  constexpr double kRate = 8.0;
  constexpr int kNum = 20000;
  const std::vector<double> t = PoissonArrivals(kRate, kNum, /*seed=*/123);
  ASSERT_EQ(t.size(), static_cast<size_t>(kNum));
  EXPECT_EQ(t[0], 0.0);
  std::vector<double> gaps;
  for (int i = 1; i < kNum; ++i) {
    ASSERT_GE(t[i], t[i - 1]);
    gaps.push_back(t[i] - t[i - 1]);
  }
  const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / gaps.size();
  // The sample mean of 19999 exponential gaps has a relative sd of 0.7 %.
  EXPECT_NEAR(mean, 1.0 / kRate, 0.03 / kRate);
  // Exponential gaps: the standard deviation equals the mean (not a fixed step).
  double sum_sq = 0;
  for (double g : gaps) sum_sq += (g - mean) * (g - mean);
  EXPECT_NEAR(std::sqrt(sum_sq / gaps.size()), 1.0 / kRate, 0.05 / kRate);
}

TEST(PoissonArrivalsTest, SeededAndInfiniteRate) {
  EXPECT_EQ(PoissonArrivals(3, 50, 9), PoissonArrivals(3, 50, 9));
  EXPECT_NE(PoissonArrivals(3, 50, 9), PoissonArrivals(3, 50, 10));
  const std::vector<double> all_at_once =
      PoissonArrivals(std::numeric_limits<double>::infinity(), 7, 1);
  EXPECT_EQ(all_at_once, std::vector<double>(7, 0.0));
  EXPECT_TRUE(PoissonArrivals(2, 0, 1).empty());
}

TEST(SampleLengthsTest, UniformWithinTheRatio) {
  std::mt19937_64 rng(5);
  const std::vector<int> fixed = SampleLengths(64, 0.0, 10, rng);
  EXPECT_EQ(fixed, std::vector<int>(10, 64));
  const std::vector<int> lengths = SampleLengths(100, 0.5, 5000, rng);
  const auto [low, high] = std::minmax_element(lengths.begin(), lengths.end());
  EXPECT_EQ(*low, 50);
  EXPECT_EQ(*high, 150);
  const double mean = std::accumulate(lengths.begin(), lengths.end(), 0.0) / lengths.size();
  EXPECT_NEAR(mean, 100, 2);
  std::mt19937_64 rng2(5);
  EXPECT_EQ(SampleLengths(1, 0.9, 20, rng2), std::vector<int>(20, 1));  // never below 1
}

TEST(BuildWorkloadTest, RandomIdsStartWithBosAndAvoidSpecialIds) {
  LoadgenOptions options;
  options.input_len = 32;
  options.output_len = 8;
  const ModelLimits limits{1024, 1024, 2};
  const std::vector<RequestSpec> specs = BuildWorkload(options, limits, 20, 3);
  ASSERT_EQ(specs.size(), 20u);
  for (const RequestSpec& spec : specs) {
    ASSERT_EQ(spec.prompt_ids.size(), 32u);
    EXPECT_EQ(spec.prompt_ids[0], 2);
    for (size_t i = 1; i < spec.prompt_ids.size(); ++i) {
      EXPECT_GE(spec.prompt_ids[i], kMinRandomTokenId);
      EXPECT_LT(spec.prompt_ids[i], 1024);
    }
    EXPECT_EQ(spec.max_tokens, 8);
    EXPECT_TRUE(spec.prompt_text.empty());
  }
  EXPECT_NE(specs[0].prompt_ids, specs[1].prompt_ids);
  EXPECT_EQ(BuildWorkload(options, limits, 20, 3)[7].prompt_ids, specs[7].prompt_ids);
}

TEST(BuildWorkloadTest, TextPrompt) {
  LoadgenOptions options;
  options.prompt = "Love is";
  options.output_len = 4;
  const std::vector<RequestSpec> specs = BuildWorkload(options, ModelLimits{1024, 1024, {}}, 3, 0);
  for (const RequestSpec& spec : specs) {
    EXPECT_EQ(spec.prompt_text, "Love is");
    EXPECT_TRUE(spec.prompt_ids.empty());
    EXPECT_EQ(spec.max_tokens, 4);
  }
}

TEST(CheckWorkloadFitsTest, LongestRequestMustFitTheContext) {
  LoadgenOptions options;
  options.input_len = 100;
  options.output_len = 20;
  EXPECT_EQ(CheckWorkloadFits(options, {1024, 120, {}}), "");
  EXPECT_NE(CheckWorkloadFits(options, {1024, 119, {}}), "");
  options.random_range_ratio = 0.5;  // up to 150 + 30
  EXPECT_NE(CheckWorkloadFits(options, {1024, 179, {}}), "");
  EXPECT_EQ(CheckWorkloadFits(options, {1024, 180, {}}), "");
  EXPECT_NE(CheckWorkloadFits(options, {8, 1024, {}}), "");  // vocabulary of specials only
}

}  // namespace
}  // namespace gemma::loadgen
