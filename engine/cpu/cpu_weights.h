// fp32 copies of the decoder weights for the CPU backend.
#pragma once

#include <vector>

#include "engine/model/weights.h"

namespace gemma::cpu {

struct LayerParams {
  std::vector<float> wq, wk, wv, wo;  // wv empty when k_eq_v
  std::vector<float> q_norm, k_norm;
  std::vector<float> input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;
  std::vector<float> w_gate, w_up, w_down;
  float layer_scalar = 1.0f;
};

struct ModelParams {
  std::vector<float> embedding;  // [V, H], also the lm_head
  std::vector<float> final_norm;
  float embed_scale = 1.0f;      // sqrt(H), unrounded (fp32 compute)
  std::vector<LayerParams> layers;
};

ModelParams ConvertWeights(const LoadedModel& model);

}  // namespace gemma::cpu
