// The text decoder's tensors, found in a checkpoint and checked against the
// config: every tensor present, of a float dtype (bf16/f16/f32), at its shape.
// Linear-layer weights may instead be FP8 E4M3 with a per-output-channel
// `<name>_scale` (value = fp8 * scale), the layout vLLM serves from
// llm-compressor FP8 / FP8_DYNAMIC (compressed-tensors) and quant_method
// "fp8" checkpoints: weight_scale [out, 1] or [out]; a per-tensor scale
// ([] or [1]) is accepted and broadcast. Only the CUDA backend reads them.
// A compressed-tensors pack-quantized W4A16 checkpoint (config.json's
// quantization_config) holds them as `weight_packed` / `weight_scale` /
// `weight_shape` (PackedInt4Ref; engine/model/int4_checkpoint.h), except the
// modules its `ignore` list names, which stay float.
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

// A pack-quantized linear layer: `weight_packed` I32 [out, ceil(in / 8)],
// `weight_scale` [out, ceil(in / group)] (bf16/f16/f32, each an fp16 value:
// checked when bound) and `weight_shape` ([out, in], checked). packed.info ==
// nullptr for a float (or FP8) matrix.
struct PackedInt4Ref {
  TensorRef packed, scale;
  int64_t rows = 0, cols = 0;
  int group = 0;
  bool present() const { return packed.info != nullptr; }
};

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
  // W4A16 checkpoints: each matrix above that is pack-quantized (its float
  // TensorRef then has info == nullptr). q/k/v, and gate/up, are all packed
  // or all float: they run as one fused matrix.
  PackedInt4Ref q_proj_int4, k_proj_int4, v_proj_int4, o_proj_int4;
  PackedInt4Ref gate_proj_int4, up_proj_int4, down_proj_int4;
};

struct ModelWeights {
  TensorRef embed_tokens;  // [V, H], also the tied lm_head
  TensorRef final_norm;    // [H]
  std::vector<LayerWeights> layers;
  bool has_fp8 = false;    // some linear weight is F8_E4M3 (CUDA backend only)
  bool has_int4 = false;   // some linear weight is pack-quantized (W4A16)
};

// Finds and validates every decoder tensor. Errors name the tensor, the file
// and what was expected.
absl::StatusOr<ModelWeights> BindWeights(const ModelConfig& config,
                                         const Checkpoint& checkpoint);

// Converts a tensor's elements (bf16/f16/f32) to fp32 into `out`
// (REQUIRES: out.size() == num_elements).
void ConvertToFloat(const TensorRef& tensor, std::span<float> out);
std::vector<float> ToFloatVector(const TensorRef& tensor);
// A linear layer's matrix in fp32: `weight` converted, or, when `packed` is
// present, its codes times its scales ((q) * scale: exact in fp32).
std::vector<float> LinearToFloat(const TensorRef& weight, const PackedInt4Ref& packed);

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
