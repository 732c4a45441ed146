// The --weights, --lm-head and --kv-cache-dtype flags, alike in every front
// end (gemma-serve, gemma-generate, gemma-bench): CLI11 checks the value,
// ParseWeightDType / ParseKvCacheDType turn it into the enum. Header-only and
// kept with the front ends' flag parsing, so no engine library depends on
// CLI11.
#pragma once

#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "engine/core/backend_options.h"

namespace gemma {

inline void AddWeightDTypeFlags(CLI::App& app, std::optional<WeightDType>* weights,
                                std::optional<WeightDType>* lm_head) {
  app.add_option_function<std::string>(
         "--weights", [weights](const std::string& v) { *weights = *ParseWeightDType("--weights", v); },
         "linear layers in bf16, fp8 (cuda: E4M3, per-channel scales; quantized at load time unless "
         "the checkpoint is FP8 already) or int4 (W4A16; cuda: Q4_0 quantized at load time). Default: bf16, "
         "or int4 for a compressed-tensors W4A16 checkpoint (read as it is; the cpu backend too)")
      ->check(CLI::IsMember({"bf16", "fp8", "int4"}))
      ->default_str("bf16, int4 for W4A16 checkpoints");
  app.add_option_function<std::string>(
         "--lm-head", [lm_head](const std::string& v) { *lm_head = *ParseWeightDType("--lm-head", v); },
         "cuda: the LM head in bf16, fp8 (an E4M3 copy of the tied embedding; needs --weights fp8 or "
         "int4) or int4 (needs --weights int4). Default: the same as --weights; fp8 under --weights int4, "
         "bf16 for a W4A16 checkpoint that leaves lm_head unquantized")
      ->check(CLI::IsMember({"bf16", "fp8", "int4"}));
}

inline void AddKvCacheDTypeFlag(CLI::App& app, KvCacheDType* kv) {
  app.add_option_function<std::string>(
         "--kv-cache-dtype", [kv](const std::string& v) { *kv = *ParseKvCacheDType("--kv-cache-dtype", v); },
         "cuda: the KV cache in bf16 (auto), or fp8 / fp8_e4m3 (E4M3, unit scale: half the bytes per token)")
      ->check(CLI::IsMember({"auto", "bf16", "fp8", "fp8_e4m3"}))
      ->default_str("auto");
}

}  // namespace gemma
