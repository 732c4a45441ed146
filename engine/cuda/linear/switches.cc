#include "engine/cuda/linear/switches.h"

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

namespace gemma::cuda {
namespace {

// "0" turns a default-on switch off; anything else (or unset) leaves it on.
bool OnUnlessZero(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::string(v) != "0";
}

// The index in `values` of the value switch `name` is set to; `fallback`
// when it is unset or empty, or set to none of them (logged).
int OneOf(const char* name, std::initializer_list<const char*> values, int fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  std::string listed;
  int i = 0;
  for (const char* v : values) {
    if (std::string(env) == v) return i;
    listed += (i++ > 0 ? ", " : "") + std::string(v);
  }
  spdlog::warn("{}='{}' is not one of {}: {}", name, env, listed, values.begin()[fallback]);
  return fallback;
}

WgmmaPreference WgmmaFromEnv() {
  const char* env = std::getenv("GEMMA_FP8_WGMMA");
  if (env == nullptr) return WgmmaPreference::kMeasured;
  const std::string v(env);
  if (v == "0") return WgmmaPreference::kOff;
  if (v == "force") return WgmmaPreference::kForce;
  if (!v.empty() && v != "1") {
    spdlog::warn("GEMMA_FP8_WGMMA='{}' is not one of 0, 1, force: taking the measured choice (1)", v);
  }
  return WgmmaPreference::kMeasured;
}

std::string DefaultCachePath() {
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/gemma-serve/autotune.txt";
}

}  // namespace

std::vector<std::string> TuningSwitches::Names() {
  return {"GEMMA_AUTOTUNE",       "GEMMA_AUTOTUNE_CACHE",   "GEMMA_FP8_A16",       "GEMMA_FP8_WGMMA",
          "GEMMA_FP8_WGMMA_SHAPES", "GEMMA_FP8_WGMMA_MAX_M", "GEMMA_FP8_OUTER_VEC", "GEMMA_FP8_FAST_ACCUM",
          "GEMMA_PREFILL_WGMMA",  "GEMMA_INT4_BF16_COPY", "GEMMA_INT4_FP8_COPY", "GEMMA_INT4_GELU_GATE",
          "GEMMA_FP8_KV_PREFILL_BF16", "GEMMA_DECODE_ATTENTION", "GEMMA_DECODE_KEYS_FROM_VALUES",
          "GEMMA_FP8_LEFT_SCALES", "GEMMA_NORM_EARLY_LAUNCH", "GEMMA_FUSED_DECODE",
          "GEMMA_INT4_SPLIT_K",   "GEMMA_NORM_CLUSTER"};
}

TuningSwitches TuningSwitches::FromEnv() {
  TuningSwitches s;
  s.autotune = OnUnlessZero("GEMMA_AUTOTUNE");
  const char* cache = std::getenv("GEMMA_AUTOTUNE_CACHE");
  s.autotune_cache = cache != nullptr && *cache != '\0' ? cache : DefaultCachePath();
  s.fp8_a16 = OnUnlessZero("GEMMA_FP8_A16");
  s.fp8_wgmma = WgmmaFromEnv();
  if (const char* env = std::getenv("GEMMA_FP8_WGMMA_SHAPES"); env != nullptr && *env != '\0') {
    for (absl::string_view shape : absl::StrSplit(env, ',', absl::SkipEmpty())) s.fp8_wgmma_shapes.emplace(shape);
  }
  if (const char* env = std::getenv("GEMMA_FP8_WGMMA_MAX_M"); env != nullptr && *env != '\0') {
    if (!absl::SimpleAtoi(env, &s.fp8_wgmma_max_m) || s.fp8_wgmma_max_m < 0 ||
        s.fp8_wgmma_max_m > kWgmmaFp8MaxM) {
      spdlog::warn("GEMMA_FP8_WGMMA_MAX_M='{}' is not 0..{}: ignored", env, kWgmmaFp8MaxM);
      s.fp8_wgmma_max_m = kWgmmaFp8MaxM;
    }
  }
  s.fp8_outer_vec = OnUnlessZero("GEMMA_FP8_OUTER_VEC");
  s.fp8_fast_accum = OnUnlessZero("GEMMA_FP8_FAST_ACCUM");
  s.prefill_wgmma = OnUnlessZero("GEMMA_PREFILL_WGMMA");
  s.int4_bf16_copy = OnUnlessZero("GEMMA_INT4_BF16_COPY");
  s.int4_fp8_copy = OnUnlessZero("GEMMA_INT4_FP8_COPY");
  s.int4_gelu_gate = OnUnlessZero("GEMMA_INT4_GELU_GATE");
  s.fp8_kv_prefill_bf16 = OnUnlessZero("GEMMA_FP8_KV_PREFILL_BF16");
  s.fp8_left_scales = OnUnlessZero("GEMMA_FP8_LEFT_SCALES");
  s.norm_early_launch = OnUnlessZero("GEMMA_NORM_EARLY_LAUNCH");
  s.fused_decode = OnUnlessZero("GEMMA_FUSED_DECODE");
  s.norm_cluster = OnUnlessZero("GEMMA_NORM_CLUSTER");
  s.int4_split_k = static_cast<Int4SplitK>(OneOf("GEMMA_INT4_SPLIT_K", {"0", "1", "force"}, 1));
  s.decode_keys_from_values = static_cast<KeysFromValues>(OneOf("GEMMA_DECODE_KEYS_FROM_VALUES", {"auto", "1", "0"}, 0));
  if (const char* env = std::getenv("GEMMA_DECODE_ATTENTION"); env != nullptr) s.decode_attention = env;
  return s;
}

}  // namespace gemma::cuda
