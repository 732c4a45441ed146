// The one token budget: explicit max_tokens must fit every limit, unset ones
// take what the limits leave, and each refusal names the field and the
// limit the client or operator knows.
#include "engine/core/token_budget.h"

#include <string>

#include "gtest/gtest.h"

namespace gemma {
namespace {

void ExpectRefused(const absl::StatusOr<int>& result, const std::string& text) {
  ASSERT_FALSE(result.ok()) << *result;
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find(text), std::string::npos) << result.status();
}

TEST(TokenBudgetTest, ExplicitMaxTokensMustFitTheContext) {
  const TokenLimits limits{.max_context = 100};
  EXPECT_EQ(*ResolveMaxTokens(40, 60, limits, nullptr), 60);
  ExpectRefused(ResolveMaxTokens(40, 61, limits, nullptr),
                "stopping.max_tokens = 61 plus the prompt's 40 tokens exceeds the context length 100");
  ExpectRefused(ResolveMaxTokens(40, 0, limits, nullptr), "stopping.max_tokens must be >= 1, got 0");
  ExpectRefused(ResolveMaxTokens(100, std::nullopt, limits, nullptr), "prompt has 100 tokens; the context holds 100");
}

TEST(TokenBudgetTest, UnsetMaxTokensTakesWhatIsLeft) {
  TokenLimits limits{.max_context = 5000};
  EXPECT_EQ(*ResolveMaxTokens(10, std::nullopt, limits, nullptr), kDefaultMaxTokens);
  EXPECT_EQ(*ResolveMaxTokens(4500, std::nullopt, limits, nullptr), 500);
  limits.max_total_tokens = 20;
  EXPECT_EQ(*ResolveMaxTokens(8, std::nullopt, limits, nullptr), 12);
  limits.default_max_tokens = 3;
  EXPECT_EQ(*ResolveMaxTokens(8, std::nullopt, limits, nullptr), 3);
}

TEST(TokenBudgetTest, OperatorLimitsNameTheFlag) {
  const TokenLimits limits{.max_context = 512, .max_prompt_tokens = 10, .max_total_tokens = 20};
  EXPECT_EQ(*ResolveMaxTokens(10, 5, limits, nullptr), 5);
  ExpectRefused(ResolveMaxTokens(11, 5, limits, nullptr), "prompt has 11 tokens; --max-prompt-tokens is 10");
  ExpectRefused(ResolveMaxTokens(10, 11, limits, nullptr), "--max-total-tokens=20");
  const TokenLimits total_only{.max_context = 512, .max_total_tokens = 20};
  ExpectRefused(ResolveMaxTokens(20, std::nullopt, total_only, nullptr),
                "leaving no room for output under --max-total-tokens=20");
}

TEST(TokenBudgetTest, ThePoolBoundsExplicitAndDefaultBudgets) {
  const TokenLimits limits{.max_context = 512};
  int64_t asked = 0;
  const KvPoolCheck pool = [&](int64_t num_tokens) {
    asked = num_tokens;
    return num_tokens <= 256 ? absl::OkStatus() : absl::InvalidArgumentError("the pool holds 256");
  };
  EXPECT_EQ(*ResolveMaxTokens(200, 56, limits, pool), 56);
  EXPECT_EQ(asked, 256);
  ExpectRefused(ResolveMaxTokens(200, 57, limits, pool),
                "stopping.max_tokens = 57 plus the prompt's 200 tokens: the pool holds 256");
  ExpectRefused(ResolveMaxTokens(200, std::nullopt, limits, pool), "prompt has 200 tokens");
}

TEST(TokenBudgetTest, LengthStopAtTheBudget) {
  EXPECT_FALSE(OutputBudgetSpent(3, 4));
  EXPECT_TRUE(OutputBudgetSpent(4, 4));
}

}  // namespace
}  // namespace gemma
