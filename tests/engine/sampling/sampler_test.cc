#include "engine/sampling/sampler.h"
#include "engine/sampling/row_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace gemma {
namespace {

std::vector<float> RandomLogits(size_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(vocab);
  for (float& logit : logits) logit = normal(rng);
  return logits;
}

std::vector<float> LogitsOfProbs(std::initializer_list<double> probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

SamplingParams Params(float temperature = 1.0f) {
  SamplingParams params;
  params.temperature = temperature;
  return params;
}

// Draws `num_draws` tokens from fresh copies of `logits` with one sampler.
std::map<int32_t, int> Histogram(const SamplingParams& params, const std::vector<float>& logits,
                                 int num_draws, uint64_t seed = 7) {
  SequenceSampler sampler(params, {}, seed);
  std::map<int32_t, int> counts;
  for (int i = 0; i < num_draws; ++i) {
    std::vector<float> copy = logits;
    ++counts[sampler.Sample(copy).token_id];
  }
  return counts;
}

std::set<int32_t> Keys(const std::map<int32_t, int>& counts) {
  std::set<int32_t> keys;
  for (const auto& [id, count] : counts) keys.insert(id);
  return keys;
}

TEST(SamplerTest, GreedyIsArgmaxWithTiesToLowestId) {
  std::vector<float> logits = RandomLogits(5000, 1);
  const auto argmax = std::max_element(logits.begin(), logits.end()) - logits.begin();
  SequenceSampler sampler(Params(0.0f), {}, 0);
  EXPECT_EQ(sampler.Sample(logits).token_id, argmax);

  std::vector<float> tied = {1.0f, 3.0f, 2.0f, 3.0f};
  SequenceSampler tie_sampler(Params(0.0f), {}, 0);
  EXPECT_EQ(tie_sampler.Sample(tied).token_id, 1);
}

TEST(SamplerTest, TopKOneEqualsGreedy) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits = RandomLogits(3000, seed);
    std::vector<float> copy = logits;
    SamplingParams params = Params(1.3f);
    params.top_k = 1;
    SequenceSampler top1(params, {}, seed);
    SequenceSampler greedy(Params(0.0f), {}, seed);
    EXPECT_EQ(top1.Sample(logits).token_id, greedy.Sample(copy).token_id);
  }
}

TEST(SamplerTest, TopKRestrictsToTheKBest) {
  const std::vector<float> logits = RandomLogits(1000, 3);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  SamplingParams params = Params(5.0f);  // flatten so all k show up
  params.top_k = 5;
  const std::set<int32_t> expected(order.begin(), order.begin() + 5);
  EXPECT_EQ(Keys(Histogram(params, logits, 3000)), expected);
}

TEST(SamplerTest, TopPRestrictsToTheNucleus) {
  SamplingParams params = Params();
  params.top_p = 0.75f;  // 0.5 + 0.3 covers it; 0.5 alone does not
  const auto counts = Histogram(params, LogitsOfProbs({0.15, 0.5, 0.05, 0.3}), 3000);
  EXPECT_EQ(Keys(counts), (std::set<int32_t>{1, 3}));
  // Renormalized within the nucleus: 0.5 / 0.8 = 0.625.
  EXPECT_NEAR(counts.at(1) / 3000.0, 0.625, 0.03);
}

TEST(SamplerTest, TopPOverLargeFlatVocabularyWidensThePrefix) {
  // With equal logits the nucleus is the lowest 90% of ids (ties go to the
  // lower id), far more than the first sorted prefix.
  const size_t vocab = 262144;
  const std::vector<float> logits(vocab, 0.0f);
  SamplingParams params = Params();
  params.top_p = 0.9f;
  const int32_t largest = *Keys(Histogram(params, logits, 200)).rbegin();
  EXPECT_LE(largest, static_cast<int32_t>(0.9 * vocab));
  EXPECT_GT(largest, static_cast<int32_t>(0.5 * vocab));
}

TEST(SamplerTest, MinPDropsUnlikelyTokens) {
  SamplingParams params = Params();
  params.min_p = 0.2f;  // threshold 0.2 * 0.5 = 0.1: drops the 0.05 token only
  EXPECT_EQ(Keys(Histogram(params, LogitsOfProbs({0.5, 0.3, 0.15, 0.05}), 3000)),
            (std::set<int32_t>{0, 1, 2}));
}

TEST(SamplerTest, PenaltiesChangeLogitsByTheRightAmounts) {
  SamplingParams params = Params(0.0f);
  params.repetition_penalty = 2.0f;
  params.presence_penalty = 0.5f;
  params.frequency_penalty = 0.25f;
  const std::vector<int32_t> prompt = {1, 4};
  SequenceSampler sampler(params, prompt, 0);
  sampler.Accept(2);
  sampler.Accept(2);
  sampler.Accept(3);
  std::vector<float> logits = {9.0f, 4.0f, -1.0f, 2.0f, -3.0f, 1.0f};
  EXPECT_EQ(sampler.Sample(logits).token_id, 0);
  EXPECT_FLOAT_EQ(logits[0], 9.0f);                       // untouched
  EXPECT_FLOAT_EQ(logits[1], 2.0f);                       // prompt, positive: / 2
  EXPECT_FLOAT_EQ(logits[2], -1.0f * 2 - 0.5f - 0.25f * 2);  // * 2, presence, 2 x frequency
  EXPECT_FLOAT_EQ(logits[3], 2.0f / 2 - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(logits[4], -6.0f);                      // prompt, negative: * 2
  EXPECT_FLOAT_EQ(logits[5], 1.0f);

  // The sampled token counts as output from now on.
  std::vector<float> next = {9.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  sampler.Sample(next);
  EXPECT_FLOAT_EQ(next[0], 9.0f / 2 - 0.5f - 0.25f);
}

TEST(SamplerTest, SameSeedSameTokens) {
  SamplingParams params = Params(1.0f);
  params.seed = 42;
  SequenceSampler a(params, {}, 1), b(params, {}, 2);  // the explicit seed wins
  SamplingParams unseeded = Params(1.0f);
  SequenceSampler c(unseeded, {}, 42);  // the fallback seed is used when unset
  for (uint32_t step = 0; step < 50; ++step) {
    std::vector<float> la = RandomLogits(512, step), lb = la, lc = la;
    const int32_t token = a.Sample(la).token_id;
    EXPECT_EQ(token, b.Sample(lb).token_id);
    EXPECT_EQ(token, c.Sample(lc).token_id);
  }
}

TEST(SamplerTest, DifferentSeedsDiffer) {
  const std::vector<float> flat(1000, 0.0f);
  std::vector<int32_t> first, second;
  for (uint64_t seed : {1u, 2u}) {
    SamplingParams params = Params();
    params.seed = seed;
    SequenceSampler sampler(params, {}, 0);
    auto& out = seed == 1 ? first : second;
    for (int i = 0; i < 20; ++i) {
      std::vector<float> copy = flat;
      out.push_back(sampler.Sample(copy).token_id);
    }
  }
  EXPECT_NE(first, second);
}

TEST(SamplerTest, TemperatureDistributionMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 1.5f, -1.0f, 0.2f};
  const float temperature = 0.7f;
  const int num_draws = 20000;
  const auto counts = Histogram(Params(temperature), logits, num_draws, 123);
  double total = 0.0;
  for (float logit : logits) total += std::exp(logit / temperature);
  double chi_square = 0.0;
  for (size_t id = 0; id < logits.size(); ++id) {
    const double expected = num_draws * std::exp(logits[id] / temperature) / total;
    const double observed = counts.contains(id) ? counts.at(id) : 0;
    chi_square += (observed - expected) * (observed - expected) / expected;
  }
  EXPECT_LT(chi_square, 24.3);  // 7 degrees of freedom, p = 0.001
}

TEST(SamplerTest, LogprobsAreNormalizedAndOrdered) {
  const size_t vocab = 20;
  SamplingParams params = Params(0.8f);
  params.num_logprobs = 20;
  params.top_k = 3;  // truncation does not change the reported distribution
  SequenceSampler sampler(params, {}, 5);
  std::vector<float> logits = RandomLogits(vocab, 9);
  const SampleResult result = sampler.Sample(logits);
  ASSERT_EQ(result.top.size(), vocab);
  double mass = 0.0;
  for (size_t i = 0; i < result.top.size(); ++i) {
    mass += std::exp(result.top[i].logprob);
    if (i > 0) {
      EXPECT_GE(result.top[i - 1].logprob, result.top[i].logprob);
    }
  }
  EXPECT_NEAR(mass, 1.0, 1e-5);
  const auto chosen = std::find_if(result.top.begin(), result.top.end(),
                                   [&](const TokenLogprob& t) { return t.token_id == result.token_id; });
  ASSERT_NE(chosen, result.top.end());
  EXPECT_FLOAT_EQ(chosen->logprob, result.logprob);
  EXPECT_LT(chosen - result.top.begin(), 3);
}

TEST(SamplerTest, GreedyLogprobsAreLogSoftmaxOfPenalizedLogits) {
  SamplingParams params = Params(0.0f);
  params.num_logprobs = 2;
  params.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {0};
  SequenceSampler sampler(params, prompt, 0);
  std::vector<float> logits = {4.0f, 3.0f, 1.0f};  // token 0 penalized to 2
  const SampleResult result = sampler.Sample(logits);
  const double normalizer = std::log(std::exp(2.0) + std::exp(3.0) + std::exp(1.0));
  EXPECT_EQ(result.token_id, 1);
  EXPECT_NEAR(result.logprob, 3.0 - normalizer, 1e-5);
  ASSERT_EQ(result.top.size(), 2u);
  EXPECT_EQ(result.top[0].token_id, 1);
  EXPECT_EQ(result.top[1].token_id, 0);
  EXPECT_NEAR(result.top[1].logprob, 2.0 - normalizer, 1e-5);
}

// One greedy rule: temperature 0 and temperatures too small to scale by
// (1e-6) are the same argmax with the same unscaled logprobs on the host
// sampler, and the same argmax in the device sampler's host twin.
TEST(SamplerTest, TinyTemperaturesAreGreedyOnEveryPath) {
  const std::vector<float> logits = RandomLogits(4000, 11);
  const auto argmax =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  SamplingParams zero = Params(0.0f);
  zero.num_logprobs = 3;
  std::vector<float> zero_copy = logits;
  const SampleResult at_zero = SequenceSampler(zero, {}, 5).Sample(zero_copy);
  for (float temperature : {1e-6f, 9.9e-6f, 1e-30f}) {
    SamplingParams tiny = zero;
    tiny.temperature = temperature;
    EXPECT_TRUE(tiny.greedy()) << temperature;
    std::vector<float> copy = logits;
    const SampleResult result = SequenceSampler(tiny, {}, 5).Sample(copy);
    EXPECT_EQ(result.token_id, argmax) << temperature;
    EXPECT_FLOAT_EQ(result.logprob, at_zero.logprob) << temperature;
    ASSERT_EQ(result.top.size(), at_zero.top.size());
    for (size_t i = 0; i < result.top.size(); ++i) {
      EXPECT_EQ(result.top[i].token_id, at_zero.top[i].token_id);
      EXPECT_FLOAT_EQ(result.top[i].logprob, at_zero.top[i].logprob);
    }
    for (uint64_t step = 0; step < 20; ++step) {
      const RowSampling row{temperature, 0, 1.0f, 0.0f, /*seed=*/3, step};
      EXPECT_EQ(SampleRow(logits, row), argmax) << temperature;
    }
  }
  EXPECT_FALSE(Params(1e-5f).greedy());
  EXPECT_TRUE(Params(0.0f).greedy());
}

TEST(SamplerTest, NoLogprobsUnlessAsked) {
  SequenceSampler sampler(Params(), {}, 0);
  std::vector<float> logits = RandomLogits(100, 2);
  EXPECT_TRUE(sampler.Sample(logits).top.empty());
  SamplingParams zero = Params();
  zero.num_logprobs = 0;
  SequenceSampler only_chosen(zero, {}, 0);
  logits = RandomLogits(100, 2);
  const SampleResult result = only_chosen.Sample(logits);
  EXPECT_TRUE(result.top.empty());
  EXPECT_LT(result.logprob, 0.0f);
}

TEST(SamplerTest, FullVocabularyWithAllTruncations) {
  SamplingParams params = Params(0.9f);
  params.top_k = 50;
  params.top_p = 0.9f;
  params.min_p = 0.05f;
  params.num_logprobs = 5;
  const std::vector<float> logits = RandomLogits(262144, 11);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 50, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const std::set<int32_t> top50(order.begin(), order.begin() + 50);
  for (int32_t id : Keys(Histogram(params, logits, 50))) EXPECT_TRUE(top50.contains(id));
}

}  // namespace
}  // namespace gemma
