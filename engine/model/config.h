// Gemma 4 text-decoder configuration, parsed from a Hugging Face config.json.
//
// Both schemas load: explicit `global_head_dim` / `num_global_key_value_heads`
// and `per_layer_config` keyed by zero-padded layer index; multimodal configs
// (fields under `text_config`) and flat text-only ones. Every field the
// forward needs is required: a missing or contradictory one is an error that
// names it. We never fall back to transformers' class defaults, which describe
// a different model.
//
// Thread-safety: immutable after parsing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/quantization_config.h"

namespace gemma {

enum class LayerType { kSliding, kGlobal };

// Shape and RoPE of one decoder layer's attention.
struct LayerSpec {
  LayerType type = LayerType::kSliding;
  int head_dim = 0;
  int num_kv_heads = 0;
  bool k_eq_v = false;        // global layers with attention_k_eq_v: no v_proj
  float rope_theta = 0.0f;
  // Number of rotated frequency pairs; pair k uses theta^(-2k/head_dim).
  // Sliding (default rope): head_dim/2. Global (proportional): factor*head_dim/2.
  int rope_pairs = 0;
  bool is_global() const { return type == LayerType::kGlobal; }
};

// Sampling defaults a model ships in generation_config.json (vLLM applies
// these to requests that leave the field unset). Absent fields stay unset.
struct GenerationDefaults {
  std::optional<float> temperature;
  std::optional<int> top_k;
  std::optional<float> top_p;
  std::optional<float> repetition_penalty;
};

struct ModelConfig {
  std::string architecture;        // e.g. Gemma4ForConditionalGeneration
  bool multimodal = false;         // weights under model.language_model.*
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;               // query heads, all layers
  int sliding_window = 0;          // a query sees at most this many keys
  int max_position_embeddings = 0;
  float rms_norm_eps = 0.0f;
  float final_logit_softcap = 0.0f;  // 0 = none
  std::string hidden_activation;   // gelu_pytorch_tanh
  std::string dtype;               // checkpoint dtype as declared (bfloat16)
  int32_t pad_token_id = 0;
  int32_t bos_token_id = 0;
  std::vector<int32_t> eos_token_ids;  // generation stops at any of these
  GenerationDefaults generation_defaults;  // from generation_config.json
  std::vector<LayerSpec> layers;
  // config.json's compressed-tensors pack-quantized W4A16 quantization_config
  // (engine/model/quantization_config.h); nullopt for float (and FP8) checkpoints.
  std::optional<quant::Int4CheckpointConfig> int4_checkpoint;

  // Prefix of text-decoder tensor names: "model.language_model." or "model.".
  std::string tensor_prefix() const {
    return multimodal ? "model.language_model." : "model.";
  }
  int num_global_layers() const;
  int max_head_dim() const;
  // Parameter count of the text decoder (tied embedding counted once).
  int64_t num_parameters() const;
};

// Parses config.json text. `source` names the file in error messages.
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text,
                                             std::string_view source);
// Reads DIR/config.json (and DIR/generation_config.json, if any: its eos ids
// join the config's, its sampling fields become generation_defaults).
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

}  // namespace gemma
