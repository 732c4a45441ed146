// The text decoder's tensors, found in a checkpoint and checked against the
// config: every tensor present, of a float dtype (bf16/f16/f32), at its shape.
// Linear-layer weights may instead be FP8 E4M3 with a per-output-channel
// `<name>_scale` (value = fp8 * scale), the layout vLLM serves from
// llm-compressor FP8 / FP8_DYNAMIC (compressed-tensors) and quant_method
// "fp8" checkpoints: weight_scale [out, 1] or [out]; a per-tensor scale
// ([] or [1]) is accepted and broadcast. Only the CUDA backend reads them.
// Vision/audio tensors are ignored. Backends convert from these views.
//
// Thread-safety: immutable; valid while the Checkpoint lives.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/config.h"
#include "engine/model/safetensors.h"

namespace gemma {

struct LayerWeights {
  TensorRef q_proj;            // [heads*D, H]
  TensorRef k_proj;            // [kv*D, H]
  TensorRef v_proj;            // [kv*D, H]; info == nullptr when k_eq_v
  TensorRef o_proj;            // [H, heads*D]
  TensorRef q_norm, k_norm;    // [D]
  TensorRef input_layernorm, post_attention_layernorm;      // [H]
  TensorRef pre_feedforward_layernorm, post_feedforward_layernorm;  // [H]
  TensorRef gate_proj, up_proj;  // [I, H]
  TensorRef down_proj;           // [H, I]
  TensorRef layer_scalar;        // [1]
  // FP8 checkpoints: the scale of each F8_E4M3 matrix above ([out, 1], [out],
  // [] or [1]; bf16/f16/f32); info == nullptr for float matrices.
  TensorRef q_proj_scale, k_proj_scale, v_proj_scale, o_proj_scale;
  TensorRef gate_proj_scale, up_proj_scale, down_proj_scale;
};

struct ModelWeights {
  TensorRef embed_tokens;  // [V, H], also the tied lm_head
  TensorRef final_norm;    // [H]
  std::vector<LayerWeights> layers;
  bool has_fp8 = false;    // some linear weight is F8_E4M3 (CUDA backend only)
};

// Finds and validates every decoder tensor. Errors name the tensor, the file
// and what was expected.
absl::StatusOr<ModelWeights> BindWeights(const ModelConfig& config,
                                         const Checkpoint& checkpoint);

// Converts a tensor's elements (bf16/f16/f32) to fp32 into `out`
// (REQUIRES: out.size() == num_elements).
void ConvertToFloat(const TensorRef& tensor, std::span<float> out);
std::vector<float> ToFloatVector(const TensorRef& tensor);

float Bf16ToFloat(uint16_t bits);
uint16_t FloatToBf16(float value);  // round to nearest even
float HalfToFloat(uint16_t bits);

// A model directory opened and checked: config, checkpoint and weight views.
struct LoadedModel {
  std::string dir;
  ModelConfig config;
  std::unique_ptr<Checkpoint> checkpoint;
  ModelWeights weights;
};
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const std::string& model_dir);

}  // namespace gemma
