// What a backend is built from: which backend, the model, and the dtypes and
// sizes of its weights and KV cache. Plain data (plus the flag parsers), so
// the factory, every backend and the front ends share it without depending
// on one another.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace gemma {

// How the CUDA backend stores the linear layers' weights. FP8 is E4M3 with a
// per-output-channel scale (quantized at load time from a bf16 checkpoint, or
// read from a pre-quantized one); embedding and norms stay bf16/fp32, the LM
// head follows BackendOptions::lm_head.
// INT4 is W4A16: GGML Q4_0 (blocks of 32 input columns, one fp16 scale),
// quantized at load time, or a compressed-tensors pack-quantized W4A16
// checkpoint's codes and scales as they are, with bf16 activations
// (engine/cuda/int4_weights.cc).
enum class WeightDType { kBF16, kFP8, kINT4 };

// Parses a --weights value ("bf16", "fp8" or "int4"); the error names `flag`
// and the value.
inline absl::StatusOr<WeightDType> ParseWeightDType(std::string_view flag, std::string_view value) {
  if (value == "bf16") return WeightDType::kBF16;
  if (value == "fp8") return WeightDType::kFP8;
  if (value == "int4") return WeightDType::kINT4;
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(flag), " must be bf16, fp8 or int4, got '", std::string(value), "'"));
}
inline std::string_view WeightDTypeName(WeightDType d) {
  return d == WeightDType::kFP8 ? "fp8" : d == WeightDType::kINT4 ? "int4" : "bf16";
}

// The linear layers' dtype a backend runs: `flag` (--weights) when given,
// else what the checkpoint is: int4 for a compressed-tensors W4A16 checkpoint
// (`int4_checkpoint`: config.json's quantization_config), bf16 otherwise. A
// W4A16 checkpoint runs as int4 only (its codes are not re-quantized or
// widened), so another --weights is an error that names both.
inline absl::StatusOr<WeightDType> ResolveWeightDType(std::optional<WeightDType> flag, bool int4_checkpoint) {
  if (!int4_checkpoint) return flag.value_or(WeightDType::kBF16);
  if (flag.has_value() && *flag != WeightDType::kINT4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--weights ", std::string(WeightDTypeName(*flag)),
        ": the checkpoint is compressed-tensors pack-quantized W4A16 (config.json quantization_config), "
        "which runs as int4 only: leave --weights out or pass --weights int4"));
  }
  return WeightDType::kINT4;
}

// How the CUDA backend stores the KV cache: bf16, or FP8 E4M3 with unit
// scale (vLLM's --kv-cache-dtype fp8 without calibrated scales; Gemma 4's K
// and V are RMS-normalized, so O(1)): half the bytes per token, so twice the
// tokens in the same memory and half the attention reads of a decode step.
enum class KvCacheDType { kBF16, kFP8 };

// Parses a --kv-cache-dtype value: "auto" (the model's dtype: bf16), "bf16",
// "fp8" or "fp8_e4m3" (vLLM's names); the error names `flag` and the value.
inline absl::StatusOr<KvCacheDType> ParseKvCacheDType(std::string_view flag, std::string_view value) {
  if (value == "auto" || value == "bf16") return KvCacheDType::kBF16;
  if (value == "fp8" || value == "fp8_e4m3") return KvCacheDType::kFP8;
  return absl::InvalidArgumentError(absl::StrCat(std::string(flag), " must be auto, bf16, fp8 or fp8_e4m3, got '",
                                                 std::string(value), "'"));
}
inline std::string_view KvCacheDTypeName(KvCacheDType d) { return d == KvCacheDType::kFP8 ? "fp8" : "bf16"; }

struct BackendOptions {
  std::string backend = "auto";   // cpu | cuda | auto (cuda when a GPU is present)
  std::string model_dir;          // config.json + safetensors (+ tokenizer.model)
  bool random_weights = false;    // cuda only: real shapes, deterministic random weights
  // The linear layers (ResolveWeightDType): unset = bf16, or int4 for a
  // compressed-tensors W4A16 checkpoint (either backend); fp8, and int4 from
  // a float checkpoint, are cuda only.
  std::optional<WeightDType> weights;
  // cuda only: the LM head's dtype (an E4M3 or Q4_0 copy of the tied
  // embedding, which itself stays bf16); unset = the same as `weights`, fp8
  // under int4 weights, bf16 for a W4A16 checkpoint whose quantization_config
  // ignores lm_head (as the format says). fp8 needs fp8 or int4 weights, int4
  // needs int4.
  std::optional<WeightDType> lm_head;
  KvCacheDType kv_cache_dtype = KvCacheDType::kBF16;  // cuda only: fp8 halves the KV bytes
  int max_slots = 8;              // sequences that can be in flight together
  int max_context = 4096;         // tokens per sequence (capped by the model's max)
  int num_threads = 0;            // cpu: 0 = all cores
  bool use_cuda_graphs = true;    // cuda: replay the captured decode step
  int kv_block_size = 16;         // tokens per KV block (a power of two)
  // Blocks per pool; 0 = cpu: max_slots full contexts, cuda: sized from free
  // GPU memory (cuda: the global pool; the sliding pool holds every slot's window).
  int num_kv_blocks = 0;
  double gpu_memory_utilization = 0.9;  // cuda: share of GPU memory this process may fill
  int max_tokens_per_step = 0;    // the engine's step budget, if known (cuda: sizes the sliding pool)
  // Ranks of Megatron-style tensor parallelism (engine/parallel/shard_plan.h):
  // 1, 2 or 4; cuda: one GPU per rank; cpu: the ranks are simulated in one
  // process (the sharded arithmetic, for tests).
  int tensor_parallel_size = 1;
};

}  // namespace gemma
