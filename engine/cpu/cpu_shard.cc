#include "engine/cpu/cpu_shard.h"

#include <algorithm>

namespace gemma::cpu {
namespace {

// Rows [begin, begin + count) of a row-major [*, cols] matrix.
std::vector<float> Rows(const std::vector<float>& w, int64_t cols, int64_t begin, int64_t count) {
  return std::vector<float>(w.begin() + begin * cols, w.begin() + (begin + count) * cols);
}

// Columns [begin, begin + count) of a row-major [rows, cols] matrix.
std::vector<float> Columns(const std::vector<float>& w, int64_t cols, int64_t begin, int64_t count) {
  const int64_t rows = static_cast<int64_t>(w.size()) / cols;
  std::vector<float> out(rows * count);
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(w.begin() + r * cols + begin, count, out.begin() + r * count);
  return out;
}

}  // namespace

ModelParams ShardWeights(const ModelParams& full, const ModelConfig& config, const parallel::RankShard& shard) {
  const int64_t H = config.hidden_size, I = config.intermediate_size;
  ModelParams p;
  p.embedding = Rows(full.embedding, H, shard.vocab.begin, shard.vocab.size);
  p.final_norm = full.final_norm;
  p.embed_scale = full.embed_scale;
  for (size_t l = 0; l < full.layers.size(); ++l) {
    const LayerParams& f = full.layers[l];
    const int64_t D = config.layers[l].head_dim;
    const parallel::LayerShard& s = shard.layers[l];
    LayerParams r;  // norms and the layer scalar are replicated
    r.q_norm = f.q_norm;
    r.k_norm = f.k_norm;
    r.input_norm = f.input_norm;
    r.post_attention_norm = f.post_attention_norm;
    r.pre_feedforward_norm = f.pre_feedforward_norm;
    r.post_feedforward_norm = f.post_feedforward_norm;
    r.layer_scalar = f.layer_scalar;
    r.wq = Rows(f.wq, H, s.q_heads.begin * D, s.q_heads.size * D);
    r.wk = Rows(f.wk, H, s.kv_heads.begin * D, s.kv_heads.size * D);
    if (!f.wv.empty()) r.wv = Rows(f.wv, H, s.kv_heads.begin * D, s.kv_heads.size * D);
    r.wo = Columns(f.wo, int64_t{config.num_heads} * D, s.q_heads.begin * D, s.q_heads.size * D);
    r.w_gate = Rows(f.w_gate, H, shard.intermediate.begin, shard.intermediate.size);
    r.w_up = Rows(f.w_up, H, shard.intermediate.begin, shard.intermediate.size);
    r.w_down = Columns(f.w_down, I, shard.intermediate.begin, shard.intermediate.size);
    p.layers.push_back(std::move(r));
  }
  return p;
}

}  // namespace gemma::cpu
