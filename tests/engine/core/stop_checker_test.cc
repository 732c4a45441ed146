#include "engine/core/stop_checker.h"

#include "gtest/gtest.h"

namespace gemma {
namespace {

TEST(StopCheckerTest, HoldsBackAPossibleStopPrefixAndCutsAtTheMatch) {
  StopChecker c({"END", "\n\n"});
  EXPECT_EQ(c.Push("hello E"), "hello");  // "E" could start "END"... ("hello " minus holdback 2)
  EXPECT_FALSE(c.matched());
  EXPECT_EQ(c.Push("N"), " ");
  EXPECT_EQ(c.Push("D and more"), "");
  EXPECT_TRUE(c.matched());
  EXPECT_EQ(c.matched_string(), "END");
  EXPECT_EQ(c.Push("x"), "");
}

TEST(StopCheckerTest, FalseStartIsReleased) {
  StopChecker c({"END"});
  std::string out = c.Push("EN");
  out += c.Push("X tail");
  out += c.Flush();
  EXPECT_EQ(out, "ENX tail");
  EXPECT_FALSE(c.matched());
}

TEST(StopCheckerTest, EarliestOfSeveralMatchesWins) {
  StopChecker c({"cd", "b"});
  EXPECT_EQ(c.Push("abcd"), "a");
  EXPECT_EQ(c.matched_string(), "b");
}

TEST(StopCheckerTest, NoMatchingBeforeMinTokensButTextIsKept) {
  StopChecker c({"x"});
  EXPECT_EQ(c.Push("axb", /*can_stop=*/false), "axb");
  EXPECT_FALSE(c.matched());
  EXPECT_EQ(c.Push("cx"), "c");
  EXPECT_TRUE(c.matched());
}

TEST(StopCheckerTest, NeverSplitsAUtf8Character) {
  StopChecker c({"zzzz"});
  const std::string out = c.Push("a\xC3\xA9");  // "aé", holdback 3 bytes
  EXPECT_TRUE(out.empty() || out == "a") << out;
  EXPECT_EQ(out + c.Flush(), "a\xC3\xA9");
}

}  // namespace
}  // namespace gemma
