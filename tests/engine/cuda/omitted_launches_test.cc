// gemma-bench --omit's list: names to launch kinds, unknown names refused by
// name, and the name list back for logs.
#include "engine/cuda/omitted_launches.h"

#include <gtest/gtest.h>

namespace gemma::cuda {
namespace {

TEST(OmittedLaunches, EmptyListLeavesNothingOut) {
  auto o = ParseOmittedLaunches("");
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->any());
  EXPECT_EQ(OmittedLaunchesName(*o), "none");
}

TEST(OmittedLaunches, EachNameSetsItsKindOnly) {
  auto norms = ParseOmittedLaunches("norms");
  ASSERT_TRUE(norms.ok());
  EXPECT_TRUE(norms->norms);
  EXPECT_FALSE(norms->qkv_rope || norms->attention || norms->linears);
  auto rope = ParseOmittedLaunches("qkv-rope");
  ASSERT_TRUE(rope.ok());
  EXPECT_TRUE(rope->qkv_rope);
  EXPECT_FALSE(rope->norms || rope->attention || rope->linears);
  auto some = ParseOmittedLaunches("linears,attention");
  ASSERT_TRUE(some.ok());
  EXPECT_TRUE(some->linears && some->attention);
  EXPECT_FALSE(some->norms || some->qkv_rope);
  // The name list comes back in a fixed order, whatever the input's.
  EXPECT_EQ(OmittedLaunchesName(*some), "attention,linears");
  auto all = ParseOmittedLaunches("norms,qkv-rope,attention,linears");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(OmittedLaunchesName(*all), "norms,qkv-rope,attention,linears");
}

TEST(OmittedLaunches, UnknownOrEmptyNameIsRefusedByName) {
  auto bad = ParseOmittedLaunches("norms,gelu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'gelu'"), std::string::npos) << bad.status();
  auto empty_item = ParseOmittedLaunches("norms,");
  ASSERT_FALSE(empty_item.ok());
  EXPECT_NE(empty_item.status().message().find("''"), std::string::npos) << empty_item.status();
  EXPECT_FALSE(ParseOmittedLaunches("Norms").ok());  // names are exact
}

}  // namespace
}  // namespace gemma::cuda
