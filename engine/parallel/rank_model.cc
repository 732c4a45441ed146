#include "engine/parallel/rank_model.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gemma::parallel {
namespace {

// Collects sliced tensors into one in-memory safetensors file.
class SliceWriter {
 public:
  // The whole tensor (norms, scalars, the embedding, per-tensor scales).
  void Whole(const std::string& name, const TensorRef& t) {
    if (t.info == nullptr) return;
    Add(name, t, t.info->shape, [&](std::byte* out) { std::memcpy(out, t.data(), Bytes(*t.info)); });
  }
  // Rows [begin, begin + count) of dimension 0 (a [rows, ...] tensor).
  void Rows(const std::string& name, const TensorRef& t, int64_t begin, int64_t count) {
    if (t.info == nullptr) return;
    const int64_t row_bytes = Bytes(*t.info) / t.info->shape[0];
    std::vector<int64_t> shape = t.info->shape;
    shape[0] = count;
    Add(name, t, shape, [&](std::byte* out) { std::memcpy(out, t.data() + begin * row_bytes, count * row_bytes); });
  }
  // Columns [begin, begin + count) of a [rows, cols] matrix.
  void Columns(const std::string& name, const TensorRef& t, int64_t begin, int64_t count) {
    if (t.info == nullptr) return;
    const int64_t rows = t.info->shape[0], cols = t.info->shape[1];
    const int64_t elem = Bytes(*t.info) / (rows * cols);
    Add(name, t, {rows, count}, [&](std::byte* out) {
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(out + r * count * elem, t.data() + (r * cols + begin) * elem, count * elem);
    });
  }
  // A matrix's row scales follow its rows when there is one per row; a
  // per-tensor scale stays whole.
  void ScaleRows(const std::string& name, const TensorRef& t, int64_t matrix_rows, int64_t begin, int64_t count) {
    if (t.info == nullptr) return;
    if (!t.info->shape.empty() && t.info->shape[0] == matrix_rows && matrix_rows > 1) {
      Rows(name, t, begin, count);
    } else {
      Whole(name, t);
    }
  }

  std::unique_ptr<SafetensorsFile> Finish(std::string source) {
    return SafetensorsFile::FromMemory(std::move(source), std::move(header_), std::move(data_));
  }

 private:
  static int64_t Bytes(const TensorInfo& info) { return static_cast<int64_t>(info.data_end - info.data_begin); }

  template <typename Fill>
  void Add(const std::string& name, const TensorRef& t, std::vector<int64_t> shape, Fill fill) {
    TensorInfo info = *t.info;
    info.name = name;
    info.shape = std::move(shape);
    const int64_t elem = Bytes(*t.info) / std::max<int64_t>(1, t.info->num_elements());
    info.data_begin = data_.size();
    info.data_end = info.data_begin + elem * info.num_elements();
    data_.resize(info.data_end);
    fill(data_.data() + info.data_begin);
    header_.tensors[name] = std::move(info);
  }

  SafetensorsHeader header_;
  std::vector<std::byte> data_;
};

}  // namespace

ModelConfig RankConfig(const ModelConfig& config, const RankShard& shard) {
  ModelConfig c = config;
  c.num_heads = static_cast<int>(shard.layers.empty() ? config.num_heads : shard.layers[0].q_heads.size);
  c.intermediate_size = static_cast<int>(shard.intermediate.size);
  for (size_t l = 0; l < c.layers.size() && l < shard.layers.size(); ++l)
    c.layers[l].num_kv_heads = static_cast<int>(shard.layers[l].kv_heads.size);
  return c;
}

absl::StatusOr<std::unique_ptr<RankModel>> ShardModel(const LoadedModel& full, const RankShard& shard) {
  const ModelConfig& config = full.config;
  const ModelWeights& w = full.weights;
  if (shard.layers.size() != w.layers.size())
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", shard.rank, ": a plan of ", shard.layers.size(), " layers for ", w.layers.size()));
  SliceWriter out;
  out.Whole("embed_tokens", w.embed_tokens);
  out.Whole("final_norm", w.final_norm);
  const int64_t inter_begin = shard.intermediate.begin, inter = shard.intermediate.size;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    const LayerShard& s = shard.layers[l];
    const int64_t d = config.layers[l].head_dim;
    const std::string p = absl::StrCat(l, ".");
    const int64_t q_rows = int64_t{config.num_heads} * d, kv_rows = int64_t{config.layers[l].num_kv_heads} * d;
    out.Rows(p + "q", lw.q_proj, s.q_heads.begin * d, s.q_heads.size * d);
    out.Rows(p + "k", lw.k_proj, s.kv_heads.begin * d, s.kv_heads.size * d);
    out.Rows(p + "v", lw.v_proj, s.kv_heads.begin * d, s.kv_heads.size * d);
    out.Columns(p + "o", lw.o_proj, s.q_heads.begin * d, s.q_heads.size * d);
    out.Rows(p + "gate", lw.gate_proj, inter_begin, inter);
    out.Rows(p + "up", lw.up_proj, inter_begin, inter);
    out.Columns(p + "down", lw.down_proj, inter_begin, inter);
    out.ScaleRows(p + "q_scale", lw.q_proj_scale, q_rows, s.q_heads.begin * d, s.q_heads.size * d);
    out.ScaleRows(p + "k_scale", lw.k_proj_scale, kv_rows, s.kv_heads.begin * d, s.kv_heads.size * d);
    out.ScaleRows(p + "v_scale", lw.v_proj_scale, kv_rows, s.kv_heads.begin * d, s.kv_heads.size * d);
    out.ScaleRows(p + "gate_scale", lw.gate_proj_scale, config.intermediate_size, inter_begin, inter);
    out.ScaleRows(p + "up_scale", lw.up_proj_scale, config.intermediate_size, inter_begin, inter);
    out.Whole(p + "o_scale", lw.o_proj_scale);  // one per output row: o_proj's rows are whole
    out.Whole(p + "down_scale", lw.down_proj_scale);
    for (const auto& [name, t] : {std::pair{"q_norm", &lw.q_norm}, {"k_norm", &lw.k_norm},
                                  {"input_norm", &lw.input_layernorm}, {"post_attn_norm", &lw.post_attention_layernorm},
                                  {"pre_ff_norm", &lw.pre_feedforward_layernorm},
                                  {"post_ff_norm", &lw.post_feedforward_layernorm}, {"scalar", &lw.layer_scalar}})
      out.Whole(p + name, *t);
  }
  auto rank = std::make_unique<RankModel>();
  rank->file = out.Finish(absl::StrCat(full.dir, " (tensor-parallel rank ", shard.rank, ")"));
  const SafetensorsFile* file = rank->file.get();
  auto ref = [file](const std::string& name) {
    auto it = file->header().tensors.find(name);
    return it == file->header().tensors.end() ? TensorRef{} : TensorRef{&it->second, file};
  };
  ModelWeights& rw = rank->model.weights;
  rw.embed_tokens = ref("embed_tokens");
  rw.final_norm = ref("final_norm");
  rw.has_fp8 = w.has_fp8;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const std::string p = absl::StrCat(l, ".");
    LayerWeights lw;
    lw.q_proj = ref(p + "q");
    lw.k_proj = ref(p + "k");
    lw.v_proj = ref(p + "v");
    lw.o_proj = ref(p + "o");
    lw.gate_proj = ref(p + "gate");
    lw.up_proj = ref(p + "up");
    lw.down_proj = ref(p + "down");
    lw.q_proj_scale = ref(p + "q_scale");
    lw.k_proj_scale = ref(p + "k_scale");
    lw.v_proj_scale = ref(p + "v_scale");
    lw.o_proj_scale = ref(p + "o_scale");
    lw.gate_proj_scale = ref(p + "gate_scale");
    lw.up_proj_scale = ref(p + "up_scale");
    lw.down_proj_scale = ref(p + "down_scale");
    lw.q_norm = ref(p + "q_norm");
    lw.k_norm = ref(p + "k_norm");
    lw.input_layernorm = ref(p + "input_norm");
    lw.post_attention_layernorm = ref(p + "post_attn_norm");
    lw.pre_feedforward_layernorm = ref(p + "pre_ff_norm");
    lw.post_feedforward_layernorm = ref(p + "post_ff_norm");
    lw.layer_scalar = ref(p + "scalar");
    rw.layers.push_back(lw);
  }
  rank->model.dir = full.dir;
  rank->model.config = RankConfig(config, shard);
  return rank;
}

}  // namespace gemma::parallel
