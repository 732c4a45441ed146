// The GEMMA_* switches: docs/tuning.md lists every switch TuningSwitches
// reads, and FromEnv parses each one (values, defaults, malformed values
// keep the default). No GPU needed.
#include "engine/cuda/linear/switches.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace gemma::cuda {
namespace {

std::string TuningDoc() {
  std::ifstream in(std::string(GEMMA_TEST_DATA) + "/../../docs/tuning.md");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void UnsetAll() {
  for (const std::string& name : TuningSwitches::Names()) unsetenv(name.c_str());
}

TEST(TuningSwitches, DocumentedInTuningMd) {
  const std::string doc = TuningDoc();
  ASSERT_FALSE(doc.empty());
  for (const std::string& name : TuningSwitches::Names())
    EXPECT_NE(doc.find("| `" + name + "`"), std::string::npos) << name << " has no row in docs/tuning.md";
}

TEST(TuningSwitches, DefaultsWhenUnset) {
  UnsetAll();
  const TuningSwitches s = TuningSwitches::FromEnv();
  EXPECT_TRUE(s.autotune);
  EXPECT_NE(s.autotune_cache.find(".cache/gemma-serve/autotune.txt"), std::string::npos) << s.autotune_cache;
  EXPECT_TRUE(s.fp8_a16);
  EXPECT_EQ(s.fp8_wgmma, WgmmaPreference::kMeasured);
  EXPECT_TRUE(s.fp8_wgmma_shapes.empty());
  EXPECT_EQ(s.fp8_wgmma_max_m, kWgmmaFp8MaxM);
  EXPECT_TRUE(s.fp8_outer_vec);
  EXPECT_TRUE(s.fp8_fast_accum);
  EXPECT_TRUE(s.prefill_wgmma);
  EXPECT_TRUE(s.int4_bf16_copy);
  EXPECT_TRUE(s.int4_fp8_copy);
  EXPECT_TRUE(s.int4_gelu_gate);
  EXPECT_TRUE(s.fp8_kv_prefill_bf16);
  EXPECT_TRUE(s.fp8_left_scales);
  EXPECT_TRUE(s.norm_early_launch);
  EXPECT_TRUE(s.fused_decode);
  EXPECT_EQ(s.decode_keys_from_values, TuningSwitches::KeysFromValues::kAuto);
}

TEST(TuningSwitches, ParsesEverySwitch) {
  UnsetAll();
  setenv("GEMMA_AUTOTUNE", "0", 1);
  setenv("GEMMA_AUTOTUNE_CACHE", "/tmp/tuning-switches-test.txt", 1);
  setenv("GEMMA_FP8_A16", "0", 1);
  setenv("GEMMA_FP8_WGMMA", "force", 1);
  setenv("GEMMA_FP8_WGMMA_SHAPES", "16384x5376,5376x8192", 1);
  setenv("GEMMA_FP8_WGMMA_MAX_M", "16", 1);
  setenv("GEMMA_FP8_OUTER_VEC", "0", 1);
  setenv("GEMMA_FP8_FAST_ACCUM", "0", 1);
  setenv("GEMMA_PREFILL_WGMMA", "0", 1);
  setenv("GEMMA_INT4_BF16_COPY", "0", 1);
  setenv("GEMMA_INT4_FP8_COPY", "0", 1);
  setenv("GEMMA_INT4_GELU_GATE", "0", 1);
  setenv("GEMMA_FP8_KV_PREFILL_BF16", "0", 1);
  setenv("GEMMA_FP8_LEFT_SCALES", "0", 1);
  setenv("GEMMA_NORM_EARLY_LAUNCH", "0", 1);
  setenv("GEMMA_FUSED_DECODE", "0", 1);
  setenv("GEMMA_INT4_SPLIT_K", "0", 1);
  setenv("GEMMA_DECODE_KEYS_FROM_VALUES", "0", 1);
  const TuningSwitches s = TuningSwitches::FromEnv();
  EXPECT_FALSE(s.autotune);
  EXPECT_EQ(s.autotune_cache, "/tmp/tuning-switches-test.txt");
  EXPECT_FALSE(s.fp8_a16);
  EXPECT_EQ(s.fp8_wgmma, WgmmaPreference::kForce);
  EXPECT_EQ(s.fp8_wgmma_shapes, (std::set<std::string>{"16384x5376", "5376x8192"}));
  EXPECT_EQ(s.fp8_wgmma_max_m, 16);
  EXPECT_FALSE(s.fp8_outer_vec);
  EXPECT_FALSE(s.fp8_fast_accum);
  EXPECT_FALSE(s.prefill_wgmma);
  EXPECT_FALSE(s.int4_bf16_copy);
  EXPECT_FALSE(s.int4_fp8_copy);
  EXPECT_FALSE(s.int4_gelu_gate);
  EXPECT_FALSE(s.fp8_kv_prefill_bf16);
  EXPECT_FALSE(s.fp8_left_scales);
  EXPECT_FALSE(s.norm_early_launch);
  EXPECT_FALSE(s.fused_decode);
  EXPECT_EQ(s.int4_split_k, TuningSwitches::Int4SplitK::kOff);
  EXPECT_EQ(s.decode_keys_from_values, TuningSwitches::KeysFromValues::kOff);
  setenv("GEMMA_FP8_WGMMA", "0", 1);
  setenv("GEMMA_FP8_WGMMA_MAX_M", "65", 1);  // out of range: the default stays
  setenv("GEMMA_DECODE_KEYS_FROM_VALUES", "1", 1);
  const TuningSwitches t = TuningSwitches::FromEnv();
  EXPECT_EQ(t.fp8_wgmma, WgmmaPreference::kOff);
  EXPECT_EQ(t.fp8_wgmma_max_m, kWgmmaFp8MaxM);
  EXPECT_EQ(t.decode_keys_from_values, TuningSwitches::KeysFromValues::kOn);
  setenv("GEMMA_DECODE_KEYS_FROM_VALUES", "sometimes", 1);  // not a value: auto
  EXPECT_EQ(TuningSwitches::FromEnv().decode_keys_from_values, TuningSwitches::KeysFromValues::kAuto);
  setenv("GEMMA_NORM_EARLY_LAUNCH", "1", 1);  // anything but 0: on
  EXPECT_TRUE(TuningSwitches::FromEnv().norm_early_launch);
  setenv("GEMMA_INT4_SPLIT_K", "force", 1);
  EXPECT_EQ(TuningSwitches::FromEnv().int4_split_k, TuningSwitches::Int4SplitK::kForce);
  setenv("GEMMA_INT4_SPLIT_K", "sometimes", 1);  // not a value: the measured choice
  EXPECT_EQ(TuningSwitches::FromEnv().int4_split_k, TuningSwitches::Int4SplitK::kMeasured);
  UnsetAll();
}

}  // namespace
}  // namespace gemma::cuda
