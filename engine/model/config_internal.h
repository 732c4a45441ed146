// Private to engine/model: pieces of config.json parsing shared between
// config.cc (scalars, token ids) and config_layers.cc (per-layer specs).
#pragma once

#include "absl/status/status.h"
#include "engine/model/config.h"
#include "engine/model/json_fields.h"

namespace gemma::model_internal {

// Upper bounds keep every product in num_parameters() far from int64
// overflow; they are orders of magnitude above any real Gemma.
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;
inline constexpr int64_t kMaxDim = int64_t{1} << 20;
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHeads = 1024;
inline constexpr int64_t kMaxHeadDim = 4096;

// Fills config->layers from layer_types, head dims, kv heads (explicit or
// per_layer_config), attention_k_eq_v and rope_parameters. REQUIRES:
// config->num_layers and config->num_heads already parsed.
absl::Status ParseLayerSpecs(const JsonFields& text, ModelConfig* config);

// Reads temperature / top_k / top_p / repetition_penalty of a
// generation_config.json; each is range-checked, errors name file and field.
absl::StatusOr<GenerationDefaults> ParseGenerationDefaults(const JsonFields& gen);

}  // namespace gemma::model_internal
