// The refusals of --tensor-parallel-size, before anything is loaded: sizes
// other than 1/2/4, more ranks than visible GPUs (cuda), shapes that do not
// split; each message names what does not fit.
#include "engine/parallel/tp_check.h"

#include <string>

#include "gtest/gtest.h"

namespace gemma::parallel {
namespace {

ModelConfig Gemma31b() {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(GEMMA_TEST_DATA "/gemma4-31b");
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

void ExpectRefused(const absl::Status& s, absl::StatusCode code, const std::string& text) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_NE(s.message().find(text), std::string::npos) << s;
}

TEST(TpCheckTest, AcceptsWhatFits) {
  const ModelConfig config = Gemma31b();
  EXPECT_TRUE(CheckTensorParallel(1, config, "cuda", 1).ok());
  EXPECT_TRUE(CheckTensorParallel(2, config, "cuda", 2).ok());
  EXPECT_TRUE(CheckTensorParallel(4, config, "cuda", 8).ok());
  EXPECT_TRUE(CheckTensorParallel(4, config, "cpu", 0).ok());  // simulated ranks need no GPU
}

TEST(TpCheckTest, RefusalsNameTheReason) {
  const ModelConfig config = Gemma31b();
  ExpectRefused(CheckTensorParallel(3, config, "cuda", 8), absl::StatusCode::kInvalidArgument,
                "--tensor-parallel-size must be 1, 2 or 4, got 3");
  ExpectRefused(CheckTensorParallel(8, config, "cpu", 0), absl::StatusCode::kInvalidArgument,
                "must be 1, 2 or 4, got 8");
  ExpectRefused(CheckTensorParallel(2, config, "cuda", 1), absl::StatusCode::kFailedPrecondition,
                "--tensor-parallel-size 2 needs 2 GPUs (one per rank); 1 visible");
  ModelConfig odd = config;
  odd.intermediate_size = 21502;
  ExpectRefused(CheckTensorParallel(4, odd, "cuda", 4), absl::StatusCode::kInvalidArgument,
                "does not divide intermediate_size 21502");
  ModelConfig heads = config;
  heads.num_heads = 30;
  ExpectRefused(CheckTensorParallel(4, heads, "cpu", 0), absl::StatusCode::kInvalidArgument,
                "does not divide num_attention_heads 30");
}

}  // namespace
}  // namespace gemma::parallel
