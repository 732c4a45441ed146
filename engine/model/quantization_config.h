// config.json's `quantization_config` for 4-bit weights: compressed-tensors
// `pack-quantized` W4A16 (llm-compressor's preset vLLM serves). Only the
// variant the W4A16 kernels compute is accepted: integer weights, 4 bits,
// symmetric, strategy "group" with group_size 32 or 128, static, no
// activation or output quantization, no activation ordering, targets
// ["Linear"], no sparsity. Anything else in that format is refused with the
// field and its value named.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gemma::quant {

struct Int4CheckpointConfig {
  int group_size = 32;
  std::vector<std::string> ignore;  // module names or "re:" patterns left unquantized
};

// nullopt when config.json has no quantization_config (or a top-level one
// with another quant_method, which other loaders handle); an error for a
// compressed-tensors pack-quantized config this server cannot run.
absl::StatusOr<std::optional<Int4CheckpointConfig>> ParseInt4QuantizationConfig(std::string_view config_json);

// True when `module` (e.g. "model.layers.3.self_attn.q_proj") matches an
// `ignore` entry: an exact name, a "re:" regular expression over the whole
// name, or a suffix after a dot ("lm_head").
bool IsIgnored(const Int4CheckpointConfig& config, std::string_view module);

}  // namespace gemma::quant
