// The host twin of device sampling (engine/sampling/row_sampler.h): the
// truncation rules keep exactly what they promise, and draws over many
// steps follow the truncated softmax.
#include "engine/sampling/row_sampler.h"

#include <cmath>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/sampling/sample_rng.h"

namespace gemma {
namespace {

std::vector<float> Logits() { return {1.0f, 3.0f, 2.5f, -1.0f, 0.5f, 3.0f, 2.0f, -4.0f}; }

// Empirical frequencies of SampleRow over `n` steps.
std::map<int32_t, double> Frequencies(const std::vector<float>& logits, RowSampling row, int n) {
  std::map<int32_t, double> f;
  for (int s = 0; s < n; ++s) {
    row.step = static_cast<uint64_t>(s);
    f[SampleRow(logits, row)] += 1.0 / n;
  }
  return f;
}

TEST(RowSampler, GreedyAndDegenerateTruncationsPickTheArgmaxLowestIdOnTies) {
  const auto logits = Logits();
  EXPECT_EQ(SampleRow(logits, {0.0f}), 1);  // 1 and 5 tie at 3.0
  RowSampling k1{1.0f, 1};
  for (uint64_t s = 0; s < 50; ++s) {
    k1.step = s;
    const int32_t id = SampleRow(logits, k1);
    EXPECT_TRUE(id == 1 || id == 5) << id;  // ties at the threshold are all kept
  }
  RowSampling min_p_one{1.0f, 0, 1.0f, 1.0f};
  EXPECT_EQ(Frequencies(logits, min_p_one, 400).size(), 2u);
}

TEST(RowSampler, DrawsFollowTheSoftmaxOfTheKeptTokens) {
  const auto logits = Logits();
  const int n = 40000;
  for (RowSampling row : {RowSampling{1.0f}, RowSampling{0.7f, 4}, RowSampling{1.3f, 0, 0.8f}, RowSampling{1.0f, 0, 1.0f, 0.2f}}) {
    row.seed = 42;
    // Expected: softmax(y) over the tokens the rule keeps, computed directly.
    std::vector<float> y;
    for (float x : logits) y.push_back(x / row.temperature);
    std::vector<int> order(y.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return y[a] > y[b] || (y[a] == y[b] && a < b); });
    float floor = -INFINITY;
    if (row.top_k > 0) floor = y[order[row.top_k - 1]];
    const float max = y[order[0]];
    if (row.top_p < 1.0f) {
      double total = 0, mass = 0;
      for (float v : y) if (v >= floor) total += std::exp(v - max);
      for (int id : order) {
        mass += std::exp(y[id] - max);
        if (mass >= row.top_p * total) { floor = std::max(floor, y[id]); break; }
      }
    }
    if (row.min_p > 0) floor = std::max(floor, max + std::log(row.min_p));
    double z = 0;
    for (float v : y) if (v >= floor) z += std::exp(v - max);
    const auto got = Frequencies(logits, row, n);
    for (size_t i = 0; i < y.size(); ++i) {
      const double want = y[i] >= floor ? std::exp(y[i] - max) / z : 0.0;
      const double have = got.count(static_cast<int32_t>(i)) ? got.at(static_cast<int32_t>(i)) : 0.0;
      // 5 standard deviations of a binomial proportion, or exactly 0 when cut.
      const double tol = want > 0 ? 5 * std::sqrt(want * (1 - want) / n) + 1e-9 : 0.0;
      EXPECT_NEAR(have, want, tol) << "token " << i << " T=" << row.temperature << " k=" << row.top_k
                                   << " p=" << row.top_p << " min_p=" << row.min_p;
    }
  }
}

TEST(RowSampler, UniformsStayInsideTheOpenInterval) {
  // The extreme hashes: exactly 0 or 1 would make the Gumbel noise infinite.
  for (uint64_t h : {uint64_t{0}, ~uint64_t{0}, ~uint64_t{0} >> 1, uint64_t{1} << 63}) {
    const float u = kernels::UniformFromHash(h);
    EXPECT_GT(u, 0.0f) << h;
    EXPECT_LT(u, 1.0f) << h;
    EXPECT_TRUE(std::isfinite(-std::log(-std::log(u)))) << h;
  }
}

TEST(RowSampler, TinyTemperatureIsGreedy) {
  const auto logits = Logits();
  for (float t : {1e-39f, 1e-20f, 1e-6f}) EXPECT_EQ(SampleRow(logits, {t}), 1) << t;
}

TEST(RowSampler, SameSeedAndStepSameToken_DifferentStepsDiffer) {
  std::vector<float> flat(1000, 0.0f);
  RowSampling row{1.0f};
  row.seed = 7;
  row.step = 3;
  EXPECT_EQ(SampleRow(flat, row), SampleRow(flat, row));
  std::map<int32_t, int> seen;
  for (uint64_t s = 0; s < 64; ++s) {
    row.step = s;
    ++seen[SampleRow(flat, row)];
  }
  EXPECT_GT(seen.size(), 50u);  // a flat distribution over 1000 tokens rarely repeats
}

}  // namespace
}  // namespace gemma
