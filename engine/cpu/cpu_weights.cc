#include "engine/cpu/cpu_weights.h"

#include <cmath>

namespace gemma::cpu {
namespace {

// The reference multiplies by sqrt(H) cast to the *compute* dtype: bf16
// serving uses bf16(sqrt(H)) (73.5 for H = 5376), while this fp32 backend,
// like the fixtures' float64 golden, uses the unrounded value. The fixtures
// confirm it: rounding moves tiny-random's logits by up to 9.
float EmbedScale(const ModelConfig& config) {
  return static_cast<float>(std::sqrt(static_cast<double>(config.hidden_size)));
}

}  // namespace

ModelParams ConvertWeights(const LoadedModel& model) {
  const ModelWeights& w = model.weights;
  ModelParams p;
  p.embedding = ToFloatVector(w.embed_tokens);
  p.final_norm = ToFloatVector(w.final_norm);
  p.embed_scale = EmbedScale(model.config);
  p.layers.reserve(w.layers.size());
  for (const LayerWeights& lw : w.layers) {
    LayerParams l;
    l.wq = LinearToFloat(lw.q_proj, lw.q_proj_int4);
    l.wk = LinearToFloat(lw.k_proj, lw.k_proj_int4);
    if (lw.v_proj.info || lw.v_proj_int4.present()) l.wv = LinearToFloat(lw.v_proj, lw.v_proj_int4);
    l.wo = LinearToFloat(lw.o_proj, lw.o_proj_int4);
    l.q_norm = ToFloatVector(lw.q_norm);
    l.k_norm = ToFloatVector(lw.k_norm);
    l.input_norm = ToFloatVector(lw.input_layernorm);
    l.post_attention_norm = ToFloatVector(lw.post_attention_layernorm);
    l.pre_feedforward_norm = ToFloatVector(lw.pre_feedforward_layernorm);
    l.post_feedforward_norm = ToFloatVector(lw.post_feedforward_layernorm);
    l.w_gate = LinearToFloat(lw.gate_proj, lw.gate_proj_int4);
    l.w_up = LinearToFloat(lw.up_proj, lw.up_proj_int4);
    l.w_down = LinearToFloat(lw.down_proj, lw.down_proj_int4);
    l.layer_scalar = ToFloatVector(lw.layer_scalar)[0];
    p.layers.push_back(std::move(l));
  }
  return p;
}

}  // namespace gemma::cpu
