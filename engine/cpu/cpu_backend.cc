#include "engine/cpu/cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_ops.h"
#include "engine/cpu/cpu_shard.h"
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

// One tensor-parallel rank, simulated in this process: its weight slices and
// its KV pools (its KV heads only). With one rank it is the whole model.
struct Rank {
  parallel::RankShard shard;
  cpu::ModelParams params;
  std::vector<LayerPool> pools;  // per layer
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
  CpuBackend(const LoadedModel& model, const CpuBackendOptions& options, parallel::ShardPlan plan)
      : config_(model.config),
        pool_(options.num_threads),
        max_context_(std::min(options.max_context, model.config.max_position_embeddings)),
        max_slots_(options.max_slots),
        block_size_(options.block_size) {
    const int per_sequence = (max_context_ + block_size_ - 1) / block_size_;
    num_blocks_ = options.num_blocks > 0 ? options.num_blocks : options.max_slots * per_sequence;
    cpu::ModelParams full = cpu::ConvertWeights(model);
    ranks_.resize(plan.ranks.size());
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r].shard = std::move(plan.ranks[r]);
      ranks_[r].params = ranks_.size() == 1 ? std::move(full) : cpu::ShardWeights(full, config_, ranks_[r].shard);
      AllocatePools(ranks_[r]);
    }
  }

  const ModelConfig& config() const override { return config_; }
  std::string name() const override { return "cpu"; }
  int max_slots() const override { return max_slots_; }
  int max_context() const override { return max_context_; }
  KvCacheSpec kv_cache_spec() const override { return {block_size_, num_blocks_, num_blocks_}; }
  int64_t kv_cache_bytes() const override {
    int64_t floats = 0;
    for (const Rank& rank : ranks_)
      for (const LayerPool& p : rank.pools) floats += static_cast<int64_t>(p.k.size() + p.v.size());
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
  void AllocatePools(Rank& rank);
  int64_t Row(const LayerPool& pool, const ChunkRows& c, int32_t position) const;
  void Embed(std::span<const SequenceChunk> chunks, std::span<const ChunkRows> rows, std::vector<float>& hidden) const;
  void RunLayer(int layer, std::span<const ChunkRows> rows, std::vector<float>& hidden);
  void AttentionPartial(Rank& rank, int layer, std::span<const ChunkRows> rows, const std::vector<float>& a,
                        std::vector<float>& o);
  void MlpPartial(const Rank& rank, int layer, const std::vector<float>& m, std::vector<float>& f);
  void Attend(const Rank& rank, int layer, const ChunkRows& chunk, const float* q, const float* k, const float* v,
              float* out);
  void AppendKv(Rank& rank, int layer, const ChunkRows& chunk, const float* k, const float* v);
  void ComputeLogits(std::span<const SequenceChunk> chunks, std::span<const ChunkRows> rows,
                     const std::vector<float>& hidden, ForwardResult* out);

  ModelConfig config_;
  ThreadPool pool_;
  int max_context_;
  int max_slots_;
  int block_size_;
  int num_blocks_ = 0;
  std::vector<Rank> ranks_;  // tensor-parallel ranks, run one after another
};

void CpuBackend::AllocatePools(Rank& rank) {
  rank.pools.resize(config_.num_layers);
  for (int l = 0; l < config_.num_layers; ++l) {
    const LayerSpec& spec = config_.layers[l];
    const size_t n =
        size_t{static_cast<size_t>(num_blocks_)} * block_size_ * rank.shard.layers[l].kv_heads.size * spec.head_dim;
    rank.pools[l].k.assign(n, 0.0f);
    rank.pools[l].v.assign(n, 0.0f);
    rank.pools[l].sliding = !spec.is_global();
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
  Embed(chunks, rows, hidden);
  for (int l = 0; l < config_.num_layers; ++l) RunLayer(l, rows, hidden);
  ComputeLogits(chunks, rows, hidden, out);
  PickOnHost(chunks, sampling, out);
  if (!WantsLogits(chunks)) {
    out->logits.clear();
    out->first_row.clear();
  }
  return absl::OkStatus();
}

// The embedding is split by vocabulary: each rank looks up the ids it owns
// and contributes zeros for the rest, so the sum over ranks (the all-reduce a
// multi-GPU forward does) is the owner's row.
void CpuBackend::Embed(std::span<const SequenceChunk> chunks, std::span<const ChunkRows> rows,
                       std::vector<float>& hidden) const {
  const int64_t H = config_.hidden_size;
  for (const Rank& rank : ranks_) {
    const parallel::Range& vocab = rank.shard.vocab;
    for (size_t i = 0; i < chunks.size(); ++i) {
      for (size_t j = 0; j < chunks[i].token_ids.size(); ++j) {
        const int32_t id = chunks[i].token_ids[j];
        if (!vocab.Contains(id)) continue;
        const float* e = rank.params.embedding.data() + (id - vocab.begin) * H;
        float* h = hidden.data() + (rows[i].first_row + j) * H;
        for (int64_t d = 0; d < H; ++d) h[d] = e[d] * rank.params.embed_scale;
      }
    }
  }
}

// The sum over ranks of their partial outputs: what the all-reduces after
// o_proj and down_proj compute. One rank: its output as it is.
void SumPartials(std::vector<float>& total, const std::vector<float>& partial) {
  for (size_t i = 0; i < total.size(); ++i) total[i] += partial[i];
}

void CpuBackend::RunLayer(int layer, std::span<const ChunkRows> rows, std::vector<float>& hidden) {
  const LayerParams& p = ranks_[0].params.layers[layer];  // norms and scalar: replicated
  const int64_t H = config_.hidden_size;
  const int64_t T = static_cast<int64_t>(hidden.size()) / H;
  const float eps = config_.rms_norm_eps;

  std::vector<float> a(hidden);
  for (int64_t t = 0; t < T; ++t) cpu::RmsNorm(a.data() + t * H, p.input_norm.data(), H, eps);
  std::vector<float> o(T * H), partial;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    AttentionPartial(ranks_[r], layer, rows, a, r == 0 ? o : partial);
    if (r > 0) SumPartials(o, partial);
  }
  for (int64_t t = 0; t < T; ++t) {
    cpu::RmsNorm(o.data() + t * H, p.post_attention_norm.data(), H, eps);
    for (int64_t d = 0; d < H; ++d) hidden[t * H + d] += o[t * H + d];
  }
  std::vector<float> m(hidden);
  for (int64_t t = 0; t < T; ++t) cpu::RmsNorm(m.data() + t * H, p.pre_feedforward_norm.data(), H, eps);
  for (size_t r = 0; r < ranks_.size(); ++r) {
    MlpPartial(ranks_[r], layer, m, r == 0 ? o : partial);
    if (r > 0) SumPartials(o, partial);
  }
  for (int64_t t = 0; t < T; ++t) {
    cpu::RmsNorm(o.data() + t * H, p.post_feedforward_norm.data(), H, eps);
    for (int64_t d = 0; d < H; ++d) {
      float& h = hidden[t * H + d];
      h = p.layer_scalar * (h + o[t * H + d]);
    }
  }
}

// One rank's attention block: its query and KV heads from the normed input
// `a`, attention over its KV pool, and its o_proj columns: o (T x H) is this
// rank's partial sum of the layer's o_proj output.
void CpuBackend::AttentionPartial(Rank& rank, int layer, std::span<const ChunkRows> rows, const std::vector<float>& a,
                                  std::vector<float>& o) {
  const LayerSpec& spec = config_.layers[layer];
  const LayerParams& p = rank.params.layers[layer];
  const int64_t H = config_.hidden_size, D = spec.head_dim;
  const int64_t nq = rank.shard.layers[layer].q_heads.size, nkv = rank.shard.layers[layer].kv_heads.size;
  const int64_t T = static_cast<int64_t>(a.size()) / H;
  const float eps = config_.rms_norm_eps;
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
    Attend(rank, layer, c, q.data(), k.data(), v.data(), attn.data());
    AppendKv(rank, layer, c, k.data(), v.data());
  }
  o.resize(T * H);
  cpu::MatMul(pool_, attn.data(), T, p.wo.data(), nq * D, H, o.data());
}

// One rank's MLP: its intermediate columns of gate/up, and down_proj over
// them: f (T x H) is this rank's partial sum of down_proj's output.
void CpuBackend::MlpPartial(const Rank& rank, int layer, const std::vector<float>& m, std::vector<float>& f) {
  const LayerParams& p = rank.params.layers[layer];
  const int64_t H = config_.hidden_size, I = rank.shard.intermediate.size;
  const int64_t T = static_cast<int64_t>(m.size()) / H;
  std::vector<float> gate(T * I), up(T * I);
  cpu::MatMul(pool_, m.data(), T, p.w_gate.data(), H, I, gate.data());
  cpu::MatMul(pool_, m.data(), T, p.w_up.data(), H, I, up.data());
  for (int64_t i = 0; i < T * I; ++i) gate[i] = cpu::GeluTanh(gate[i]) * up[i];
  f.resize(T * H);
  cpu::MatMul(pool_, gate.data(), T, p.w_down.data(), I, H, f.data());
}

// Attention for every query of one chunk. Keys older than the chunk come from
// the slot's cache; the chunk's own keys come from this step's k/v rows (they
// are appended only afterwards, so a ring never overwrites a key still needed).
void CpuBackend::Attend(const Rank& rank, int layer, const ChunkRows& c, const float* q, const float* k,
                        const float* v, float* out) {
  const LayerSpec& spec = config_.layers[layer];
  const int64_t D = spec.head_dim;
  const int64_t nq = rank.shard.layers[layer].q_heads.size, nkv = rank.shard.layers[layer].kv_heads.size;
  const int64_t group = nq / nkv;  // the model's group, or all of a rank's heads on one replicated KV head
  const LayerPool& pool = rank.pools[layer];
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

void CpuBackend::AppendKv(Rank& rank, int layer, const ChunkRows& c, const float* k, const float* v) {
  const int64_t row = rank.shard.layers[layer].kv_heads.size * config_.layers[layer].head_dim;
  LayerPool& pool = rank.pools[layer];
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
      cpu::RmsNorm(selected.data() + num_rows * H, ranks_[0].params.final_norm.data(), H, config_.rms_norm_eps);
    }
  }
  out->logits.resize(num_rows * V);
  if (ranks_.size() == 1) {
    cpu::MatMul(pool_, selected.data(), num_rows, ranks_[0].params.embedding.data(), H, V, out->logits.data());
  } else {
    // Each rank's LM head gives its vocabulary columns; the gather puts them
    // side by side.
    std::vector<float> part;
    for (const Rank& rank : ranks_) {
      const parallel::Range& vocab = rank.shard.vocab;
      part.resize(num_rows * vocab.size);
      cpu::MatMul(pool_, selected.data(), num_rows, rank.params.embedding.data(), H, vocab.size, part.data());
      for (int64_t r = 0; r < num_rows; ++r)
        std::copy_n(part.data() + r * vocab.size, vocab.size, out->logits.data() + r * V + vocab.begin);
    }
  }
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
  absl::StatusOr<parallel::ShardPlan> plan = parallel::MakeShardPlan(model.config, options.tensor_parallel_size);
  if (!plan.ok()) return plan.status();
  // The KV pools are fp32 K and V of every layer (CpuBackend::AllocatePools):
  // refused here, by name, where they cannot fit the machine's memory, rather
  // than failing the allocation (an abort) or growing into the OOM killer.
  const int context = std::min(options.max_context, model.config.max_position_embeddings);
  const int64_t blocks = options.num_blocks > 0
                             ? options.num_blocks
                             : int64_t{options.max_slots} * ((context + options.block_size - 1) / options.block_size);
  double row_floats = 0;  // K and V floats of one position over the layers
  for (const LayerSpec& spec : model.config.layers) row_floats += 2.0 * spec.num_kv_heads * spec.head_dim;
  const double kv_bytes = static_cast<double>(blocks) * options.block_size * row_floats * sizeof(float);
  const double ram_bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (ram_bytes > 0 && kv_bytes > ram_bytes) {
    auto gb = [](double bytes) { return std::round(bytes / 1e8) / 10; };
    return absl::ResourceExhaustedError(absl::StrCat(
        "the cpu backend's KV cache of ", blocks, " blocks of ", options.block_size, " tokens would take ",
        gb(kv_bytes), " GB, more than this machine's ", gb(ram_bytes), " GB (",
        options.num_blocks > 0 ? absl::StrCat("--num-kv-blocks ", options.num_blocks)
                               : absl::StrCat("--max-concurrent-sequences ", options.max_slots, " x ", context,
                                              " tokens of context"),
        ")"));
  }
  return std::unique_ptr<Backend>(new CpuBackend(model, options, *std::move(plan)));
}

}  // namespace gemma
