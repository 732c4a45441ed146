#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_ops.h"
#include "engine/cpu/cpu_weights.h"
#include "engine/cpu/thread_pool.h"

namespace gemma {
namespace {

using cpu::LayerParams;

// One layer's KV pool: [num_blocks, block_size, kv_heads, head_dim] for K and
// V. Global layers index it with a chunk's global_blocks, sliding layers with
// its sliding_blocks (the block manager releases blocks that left the window).
struct LayerPool {
  std::vector<float> k, v;
  bool sliding = false;
};

// Where the tokens of one chunk sit inside the step's token rows.
struct ChunkRows {
  int64_t first_row = 0;
  int64_t num_tokens = 0;
  int32_t start_position = 0;
  std::span<const int32_t> global_blocks, sliding_blocks;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(const LoadedModel& model, const CpuBackendOptions& options)
      : config_(model.config),
        params_(cpu::ConvertWeights(model)),
        pool_(options.num_threads),
        max_context_(std::min(options.max_context, model.config.max_position_embeddings)),
        max_slots_(options.max_slots),
        block_size_(options.block_size) {
    const int per_sequence = (max_context_ + block_size_ - 1) / block_size_;
    num_blocks_ = options.num_blocks > 0 ? options.num_blocks : options.max_slots * per_sequence;
    AllocatePools();
  }

  const ModelConfig& config() const override { return config_; }
  std::string name() const override { return "cpu"; }
  int max_slots() const override { return max_slots_; }
  int max_context() const override { return max_context_; }
  KvCacheSpec kv_cache_spec() const override { return {block_size_, num_blocks_, num_blocks_}; }
  int64_t kv_cache_bytes() const override {
    int64_t floats = 0;
    for (const LayerPool& p : pools_) floats += static_cast<int64_t>(p.k.size() + p.v.size());
    return floats * static_cast<int64_t>(sizeof(float));
  }
  void ResetSlot(int) override {}  // paged: the block manager owns the KV
  // Logits are on the host anyway: next_ids by SampleRow; the logits stay in
  // the result only when asked for.
  absl::Status Forward(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                       ForwardResult* result) override;

 private:
  absl::Status Validate(std::span<const SequenceChunk> chunks) const;
  absl::Status ValidateBlocks(const SequenceChunk& c) const;
  void AllocatePools();
  int64_t Row(const LayerPool& pool, const ChunkRows& c, int32_t position) const;
  void RunLayer(int layer, std::span<const ChunkRows> rows, std::vector<float>& hidden);
  void Attend(int layer, const ChunkRows& chunk, const float* q, const float* k, const float* v,
              float* out);
  void AppendKv(int layer, const ChunkRows& chunk, const float* k, const float* v);
  void ComputeLogits(std::span<const SequenceChunk> chunks, std::span<const ChunkRows> rows,
                     const std::vector<float>& hidden, ForwardResult* out);

  ModelConfig config_;
  cpu::ModelParams params_;
  ThreadPool pool_;
  int max_context_;
  int max_slots_;
  int block_size_;
  int num_blocks_ = 0;
  std::vector<LayerPool> pools_;  // per layer
};

void CpuBackend::AllocatePools() {
  pools_.resize(config_.num_layers);
  for (int l = 0; l < config_.num_layers; ++l) {
    const LayerSpec& spec = config_.layers[l];
    const size_t n = size_t{static_cast<size_t>(num_blocks_)} * block_size_ * spec.num_kv_heads * spec.head_dim;
    pools_[l].k.assign(n, 0.0f);
    pools_[l].v.assign(n, 0.0f);
    pools_[l].sliding = !spec.is_global();
  }
}

// Row index (in units of one position's kv_heads * head_dim) of `position`.
int64_t CpuBackend::Row(const LayerPool& pool, const ChunkRows& c, int32_t position) const {
  const auto& table = pool.sliding ? c.sliding_blocks : c.global_blocks;
  return int64_t{table[position / block_size_]} * block_size_ + position % block_size_;
}

absl::Status CpuBackend::ValidateBlocks(const SequenceChunk& c) const {
  const int64_t end = c.start_position + static_cast<int64_t>(c.token_ids.size());
  const int64_t needed = (end + block_size_ - 1) / block_size_;
  if (static_cast<int64_t>(c.global_blocks.size()) < needed || static_cast<int64_t>(c.sliding_blocks.size()) < needed)
    return absl::InvalidArgumentError(absl::StrCat("slot ", c.slot, ": block tables cover ", c.global_blocks.size(), "/",
                                                   c.sliding_blocks.size(), " blocks, positions up to ", end, " need ", needed));
  // Sliding layers read from the window before the chunk's first query.
  const int64_t first_sliding = std::max<int64_t>(0, c.start_position - config_.sliding_window + 1) / block_size_;
  for (int64_t b = 0; b < needed; ++b) {
    const int32_t g = c.global_blocks[b], s = c.sliding_blocks[b];
    if (g < 0 || g >= num_blocks_)
      return absl::InvalidArgumentError(absl::StrCat("slot ", c.slot, ": global block ", g, " at index ", b, " out of range"));
    if (b >= first_sliding && (s < 0 || s >= num_blocks_))
      return absl::InvalidArgumentError(absl::StrCat("slot ", c.slot, ": sliding block ", s, " at index ", b, " out of range"));
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Validate(std::span<const SequenceChunk> chunks) const {
  std::vector<bool> used(max_slots_, false);
  for (const SequenceChunk& c : chunks) {
    if (c.slot < 0 || c.slot >= max_slots())
      return absl::InvalidArgumentError(absl::StrCat("slot ", c.slot, " out of range [0, ", max_slots(), ")"));
    if (used[c.slot]) return absl::InvalidArgumentError(absl::StrCat("slot ", c.slot, " appears twice in one step"));
    used[c.slot] = true;
    if (c.token_ids.empty()) return absl::InvalidArgumentError("empty chunk");
    if (c.start_position < 0)
      return absl::InvalidArgumentError(absl::StrCat("chunk for slot ", c.slot, " starts at ", c.start_position));
    if (c.start_position + static_cast<int64_t>(c.token_ids.size()) > max_context_)
      return absl::OutOfRangeError(absl::StrCat("slot ", c.slot, " would exceed the context of ", max_context_));
    for (int32_t id : c.token_ids)
      if (id < 0 || id >= config_.vocab_size)
        return absl::InvalidArgumentError(absl::StrCat("token id ", id, " outside the vocabulary [0, ", config_.vocab_size, ")"));
    if (absl::Status s = ValidateBlocks(c); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Forward(std::span<const SequenceChunk> chunks, std::span<const RowSampling> sampling,
                                 ForwardResult* out) {
  if (absl::Status s = CheckRows(chunks, sampling); !s.ok()) return s;
  if (absl::Status s = Validate(chunks); !s.ok()) return s;
  const int64_t hidden_size = config_.hidden_size;
  std::vector<ChunkRows> rows;
  int64_t total = 0;
  for (const SequenceChunk& c : chunks) {
    rows.push_back({total, static_cast<int64_t>(c.token_ids.size()), c.start_position, c.global_blocks, c.sliding_blocks});
    total += c.token_ids.size();
  }
  std::vector<float> hidden(total * hidden_size);
  for (size_t i = 0; i < chunks.size(); ++i) {
    for (size_t j = 0; j < chunks[i].token_ids.size(); ++j) {
      const float* e = params_.embedding.data() + int64_t{chunks[i].token_ids[j]} * hidden_size;
      float* h = hidden.data() + (rows[i].first_row + j) * hidden_size;
      for (int64_t d = 0; d < hidden_size; ++d) h[d] = e[d] * params_.embed_scale;
    }
  }
  for (int l = 0; l < config_.num_layers; ++l) RunLayer(l, rows, hidden);
  ComputeLogits(chunks, rows, hidden, out);
  PickOnHost(chunks, sampling, out);
  if (!WantsLogits(chunks)) {
    out->logits.clear();
    out->first_row.clear();
  }
  return absl::OkStatus();
}

void CpuBackend::RunLayer(int layer, std::span<const ChunkRows> rows, std::vector<float>& hidden) {
  const LayerSpec& spec = config_.layers[layer];
  const LayerParams& p = params_.layers[layer];
  const int64_t H = config_.hidden_size, D = spec.head_dim, I = config_.intermediate_size;
  const int64_t nq = config_.num_heads, nkv = spec.num_kv_heads;
  const int64_t T = static_cast<int64_t>(hidden.size()) / H;
  const float eps = config_.rms_norm_eps;

  std::vector<float> a(hidden);
  for (int64_t t = 0; t < T; ++t) cpu::RmsNorm(a.data() + t * H, p.input_norm.data(), H, eps);
  std::vector<float> q(T * nq * D), k(T * nkv * D), v(T * nkv * D);
  cpu::MatMul(pool_, a.data(), T, p.wq.data(), H, nq * D, q.data());
  cpu::MatMul(pool_, a.data(), T, p.wk.data(), H, nkv * D, k.data());
  if (spec.k_eq_v) {
    v = k;  // values come from the raw key projection, before k_norm and RoPE
  } else {
    cpu::MatMul(pool_, a.data(), T, p.wv.data(), H, nkv * D, v.data());
  }
  for (const ChunkRows& c : rows) {
    for (int64_t j = 0; j < c.num_tokens; ++j) {
      const int64_t t = c.first_row + j;
      const int32_t pos = c.start_position + static_cast<int32_t>(j);
      for (int64_t h = 0; h < nq; ++h) {
        float* qh = q.data() + (t * nq + h) * D;
        cpu::RmsNorm(qh, p.q_norm.data(), D, eps);
        cpu::ApplyRope(qh, D, spec.rope_pairs, spec.rope_theta, pos);
      }
      for (int64_t h = 0; h < nkv; ++h) {
        float* kh = k.data() + (t * nkv + h) * D;
        cpu::RmsNorm(kh, p.k_norm.data(), D, eps);
        cpu::ApplyRope(kh, D, spec.rope_pairs, spec.rope_theta, pos);
        cpu::RmsNorm(v.data() + (t * nkv + h) * D, nullptr, D, eps);
      }
    }
  }
  std::vector<float> attn(T * nq * D);
  for (const ChunkRows& c : rows) {
    Attend(layer, c, q.data(), k.data(), v.data(), attn.data());
    AppendKv(layer, c, k.data(), v.data());
  }
  std::vector<float> o(T * H);
  cpu::MatMul(pool_, attn.data(), T, p.wo.data(), nq * D, H, o.data());
  for (int64_t t = 0; t < T; ++t) {
    cpu::RmsNorm(o.data() + t * H, p.post_attention_norm.data(), H, eps);
    for (int64_t d = 0; d < H; ++d) hidden[t * H + d] += o[t * H + d];
  }
  std::vector<float> m(hidden);
  for (int64_t t = 0; t < T; ++t) cpu::RmsNorm(m.data() + t * H, p.pre_feedforward_norm.data(), H, eps);
  std::vector<float> gate(T * I), up(T * I);
  cpu::MatMul(pool_, m.data(), T, p.w_gate.data(), H, I, gate.data());
  cpu::MatMul(pool_, m.data(), T, p.w_up.data(), H, I, up.data());
  for (int64_t i = 0; i < T * I; ++i) gate[i] = cpu::GeluTanh(gate[i]) * up[i];
  cpu::MatMul(pool_, gate.data(), T, p.w_down.data(), I, H, o.data());
  for (int64_t t = 0; t < T; ++t) {
    cpu::RmsNorm(o.data() + t * H, p.post_feedforward_norm.data(), H, eps);
    for (int64_t d = 0; d < H; ++d) {
      float& h = hidden[t * H + d];
      h = p.layer_scalar * (h + o[t * H + d]);
    }
  }
}

// Attention for every query of one chunk. Keys older than the chunk come from
// the slot's cache; the chunk's own keys come from this step's k/v rows (they
// are appended only afterwards, so a ring never overwrites a key still needed).
void CpuBackend::Attend(int layer, const ChunkRows& c, const float* q, const float* k,
                        const float* v, float* out) {
  const LayerSpec& spec = config_.layers[layer];
  const int64_t D = spec.head_dim, nq = config_.num_heads, nkv = spec.num_kv_heads;
  const int64_t group = nq / nkv;
  const LayerPool& pool = pools_[layer];
  const int window = spec.is_global() ? 0 : config_.sliding_window;
  pool_.ParallelFor(c.num_tokens * nq, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    for (int64_t work = begin; work < end; ++work) {
      const int64_t j = work / nq, h = work % nq, kvh = h / group;
      const int32_t pos = c.start_position + static_cast<int32_t>(j);
      const int32_t lo = window > 0 ? std::max(0, pos - window + 1) : 0;
      const float* qh = q + ((c.first_row + j) * nq + h) * D;
      auto key = [&](int32_t u) {
        return u >= c.start_position ? k + ((c.first_row + u - c.start_position) * nkv + kvh) * D
                                     : pool.k.data() + (Row(pool, c, u) * nkv + kvh) * D;
      };
      auto value = [&](int32_t u) {
        return u >= c.start_position ? v + ((c.first_row + u - c.start_position) * nkv + kvh) * D
                                     : pool.v.data() + (Row(pool, c, u) * nkv + kvh) * D;
      };
      scores.resize(pos - lo + 1);
      float max_score = -INFINITY;
      for (int32_t u = lo; u <= pos; ++u) {
        const float* ku = key(u);
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += (double)qh[d] * ku[d];
        scores[u - lo] = static_cast<float>(s);  // scale 1.0: q and k are RMS-normed
        max_score = std::max(max_score, scores[u - lo]);
      }
      double denom = 0;
      for (float& s : scores) denom += (s = std::exp(s - max_score));
      float* oh = out + ((c.first_row + j) * nq + h) * D;
      std::fill(oh, oh + D, 0.0f);
      for (int32_t u = lo; u <= pos; ++u) {
        const float w = static_cast<float>(scores[u - lo] / denom);
        const float* vu = value(u);
        for (int64_t d = 0; d < D; ++d) oh[d] += w * vu[d];
      }
    }
  });
}

void CpuBackend::AppendKv(int layer, const ChunkRows& c, const float* k, const float* v) {
  const LayerSpec& spec = config_.layers[layer];
  const int64_t row = int64_t{spec.num_kv_heads} * spec.head_dim;
  LayerPool& pool = pools_[layer];
  for (int64_t j = 0; j < c.num_tokens; ++j) {
    const int64_t dst = Row(pool, c, c.start_position + static_cast<int32_t>(j)) * row;
    std::copy_n(k + (c.first_row + j) * row, row, pool.k.data() + dst);
    std::copy_n(v + (c.first_row + j) * row, row, pool.v.data() + dst);
  }
}

void CpuBackend::ComputeLogits(std::span<const SequenceChunk> chunks, std::span<const ChunkRows> rows,
                               const std::vector<float>& hidden, ForwardResult* out) {
  const int64_t H = config_.hidden_size, V = config_.vocab_size;
  std::vector<float> selected;
  out->first_row.clear();
  int64_t num_rows = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    out->first_row.push_back(static_cast<int>(num_rows));
    const int64_t first = chunks[i].all_logits ? 0 : rows[i].num_tokens - 1;
    for (int64_t j = first; j < rows[i].num_tokens; ++j, ++num_rows) {
      const float* h = hidden.data() + (rows[i].first_row + j) * H;
      selected.insert(selected.end(), h, h + H);
      cpu::RmsNorm(selected.data() + num_rows * H, params_.final_norm.data(), H, config_.rms_norm_eps);
    }
  }
  out->logits.resize(num_rows * V);
  cpu::MatMul(pool_, selected.data(), num_rows, params_.embedding.data(), H, V, out->logits.data());
  if (config_.final_logit_softcap > 0) {
    const float cap = config_.final_logit_softcap;
    for (float& x : out->logits) x = cap * std::tanh(x / cap);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const LoadedModel& model,
                                                          const CpuBackendOptions& options) {
  if (options.max_slots < 1)
    return absl::InvalidArgumentError(absl::StrCat("max_slots must be >= 1, got ", options.max_slots));
  if (options.max_context < 1)
    return absl::InvalidArgumentError(absl::StrCat("max_context must be >= 1, got ", options.max_context));
  if (options.block_size < 1)
    return absl::InvalidArgumentError(absl::StrCat("block_size must be >= 1, got ", options.block_size));
  if (options.num_blocks < 0)
    return absl::InvalidArgumentError(absl::StrCat("num_blocks must be >= 0, got ", options.num_blocks));
  return std::unique_ptr<Backend>(new CpuBackend(model, options));
}

}  // namespace gemma
