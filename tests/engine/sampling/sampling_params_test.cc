#include "engine/sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace gemma {
namespace {

struct InvalidCase {
  std::function<void(SamplingParams&)> mutate;
  std::string message;
};

TEST(SamplingParamsTest, DefaultsAndEdgesAreValid) {
  EXPECT_TRUE(ValidateSamplingParams({}).ok());
  SamplingParams edges;
  edges.temperature = 0.0f;
  edges.top_p = 1.0f;
  edges.min_p = 1.0f;
  edges.presence_penalty = -2.0f;
  edges.frequency_penalty = 2.0f;
  edges.num_logprobs = 20;
  edges.top_k = 0;
  EXPECT_TRUE(ValidateSamplingParams(edges).ok());
  edges.num_logprobs = -1;
  edges.min_p = 0.0f;
  EXPECT_TRUE(ValidateSamplingParams(edges).ok());
}

TEST(SamplingParamsTest, EachFieldNamedWithItsValue) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const InvalidCase cases[] = {
      {[](SamplingParams& p) { p.temperature = -0.5f; }, "temperature must be finite and >= 0, got -0.5"},
      {[&](SamplingParams& p) { p.temperature = inf; }, "temperature must be finite and >= 0, got inf"},
      {[](SamplingParams& p) { p.top_k = -1; }, "top_k must be >= 0, got -1"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p must be in (0, 1], got 0"},
      {[&](SamplingParams& p) { p.top_p = nan; }, "top_p must be in (0, 1], got nan"},
      {[](SamplingParams& p) { p.min_p = -0.1f; }, "min_p must be in [0, 1], got -0.1"},
      {[](SamplingParams& p) { p.min_p = 1.25f; }, "min_p must be in [0, 1], got 1.25"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty must be finite and > 0, got 0"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty must be in [-2, 2], got 2.5"},
      {[](SamplingParams& p) { p.frequency_penalty = -3.0f; }, "frequency_penalty must be in [-2, 2], got -3"},
      {[&](SamplingParams& p) { p.frequency_penalty = nan; }, "frequency_penalty must be in [-2, 2], got nan"},
      {[](SamplingParams& p) { p.num_logprobs = 21; }, "num_logprobs must be in [-1, 20], got 21"},
      {[](SamplingParams& p) { p.num_logprobs = -2; }, "num_logprobs must be in [-1, 20], got -2"},
  };
  for (const InvalidCase& c : cases) {
    SamplingParams params;
    c.mutate(params);
    const absl::Status status = ValidateSamplingParams(params);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(status.message(), c.message);
  }
}

}  // namespace
}  // namespace gemma
