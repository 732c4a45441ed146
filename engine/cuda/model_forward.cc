#include "engine/cuda/model_forward.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/cuda/linear/switches.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/decode_fused.h"
#include "kernels/attention/kv_expand.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/norm/residual_norm.h"
#include "kernels/rope/qkv_rope.h"
#include "kernels/sampling/argmax.h"

namespace gemma::cuda {
absl::StatusOr<std::unique_ptr<ModelForward>> ModelForward::Create(
    const ModelConfig& config, const DeviceWeights* weights, KvCache* cache, LinearDispatcher* linear, Tuner* tuner,
    int max_tokens, int max_seqs, int max_logit_rows, int decode_splits, float embed_scale,
    int max_table_entries, const PoolPlan& pools) {
  std::unique_ptr<ModelForward> r(new ModelForward());
  r->config_ = &config;
  r->weights_ = weights;
  r->cache_ = cache;
  r->linear_ = linear;
  r->tuner_ = tuner;
  r->layout_ = MetadataLayout::For(max_tokens, max_seqs, max_table_entries);
  r->max_logit_rows_ = max_logit_rows;
  r->decode_splits_ = decode_splits;
  r->embed_scale_ = embed_scale;
  r->max_context_ = pools.max_context;
  int device = 0;
  GEMMA_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&r->num_sms_, cudaDevAttrMultiProcessorCount, device));
  for (size_t l = 0; l < config.layers.size(); ++l) {
    r->max_qkv_rows_ = std::max(r->max_qkv_rows_, weights->layers()[l].qkv_rows);
    r->max_q_width_ = std::max(r->max_q_width_, config.num_heads * config.layers[l].head_dim);
  }
  // Before Allocate: an alternative build's split counts size the workspace.
  if (tuner != nullptr && !tuner->switches().decode_attention.empty()) {
    const std::string& want = tuner->switches().decode_attention;
    const std::vector<std::string> wanted = absl::StrSplit(want, ',', absl::SkipEmpty());
    for (const LayerSpec& s : config.layers) {
      for (bool fp8 : {false, true}) {
        if (r->decode_variants_.contains({s.head_dim, fp8})) continue;
        const std::vector<std::string> names = kernels::DecodeVariants(s.head_dim, fp8);
        for (const std::string& name : wanted) {  // the first of the list this head_dim has
          const auto it = std::find(names.begin(), names.end(), name);
          if (it == names.end()) continue;
          if (!kernels::DecodeVariantServes(s.head_dim, fp8, static_cast<int>(it - names.begin()),
                                            !fp8 && r->KeysFromValues(s))) {
            spdlog::warn("cuda: GEMMA_DECODE_ATTENTION: {} has no build for head_dim {} here ({}{})", name,
                         s.head_dim, fp8 ? "E4M3 cache" : "bf16 cache",
                         fp8 || r->KeysFromValues(s) ? "" : ", keys read whole");
            continue;
          }
          r->decode_variants_[{s.head_dim, fp8}] = static_cast<int>(it - names.begin());
          break;
        }
      }
    }
    std::string matched;
    for (const auto& [key, v] : r->decode_variants_) {
      matched += absl::StrCat(matched.empty() ? "" : ", ", kernels::DecodeVariants(key.first, key.second)[v],
                              " (head_dim ", key.first, key.second ? ", E4M3)" : ", bf16)");
    }
    if (matched.empty()) {
      spdlog::warn("cuda: GEMMA_DECODE_ATTENTION={} names no decode build of this model: the defaults run", want);
    } else {
      spdlog::info("cuda: decode attention (GEMMA_DECODE_ATTENTION): {}", matched);
    }
  }
  GEMMA_STATUS_RETURN_IF_ERROR(r->Allocate(max_tokens));
  r->max_table_entries_ = max_table_entries;
  if (pools.kv_fp8 && (tuner == nullptr || tuner->switches().fp8_kv_prefill_bf16)) {
    GEMMA_STATUS_RETURN_IF_ERROR(r->AllocateKvExpand(pools, max_tokens));
  }
  return r;
}

// Room for one sequence of max_context keys in a global layer, or one pass
// of max_tokens queries and their window in a sliding layer (a pass needing
// more runs the E4M3 kernels).
absl::Status ModelForward::AllocateKvExpand(const PoolPlan& pools, int max_tokens) {
  const int64_t bs = std::max(1, pools.block_size), max_context = pools.max_context;
  for (const LayerSpec& s : config_->layers) {
    const int64_t keys =
        s.is_global() ? max_context : std::min<int64_t>(max_context, config_->sliding_window + max_tokens);
    const int64_t blocks = (keys + bs - 1) / bs + 1;
    expand_elems_ = std::max(expand_elems_, blocks * bs * s.num_kv_heads * s.head_dim);
  }
  GEMMA_STATUS_RETURN_IF_ERROR(expand_k_.Allocate(expand_elems_ * sizeof(__nv_bfloat16)));
  GEMMA_STATUS_RETURN_IF_ERROR(expand_v_.Allocate(expand_elems_ * sizeof(__nv_bfloat16)));
  spdlog::info("cuda: fp8 KV cache: prefill attention runs bf16 on widened pages (scratch {:.2f} GB for {} keys; "
               "GEMMA_FP8_KV_PREFILL_BF16=0: E4M3 kernels)",
               2.0 * expand_elems_ * sizeof(__nv_bfloat16) / 1e9, pools.max_context);
  return expand_tables_.Allocate(std::max(1, max_table_entries_) * sizeof(int32_t));
}

absl::Status ModelForward::ExpandKvForPrefill(const LayerSpec& s, const PassShape& shape,
                                              kernels::AttentionParams& ap, cudaStream_t stream) {
  if (expand_elems_ == 0 || shape.q_pos0.empty() || shape.q_offsets.size() != shape.q_pos0.size() + 1)
    return absl::OkStatus();
  const int bs = ap.block_size;
  const int64_t need = kernels::KvExpandBlocks(shape.q_pos0, shape.q_offsets, bs, ap.window);
  const int64_t out_blocks = expand_elems_ / (int64_t{bs} * s.num_kv_heads * s.head_dim);
  if (need <= 0 || need > out_blocks) return absl::OkStatus();
  const kernels::KvExpandParams ep =
      kernels::KvExpandOf(ap, expand_k_.get<__nv_bfloat16>(), expand_v_.get<__nv_bfloat16>(),
                          expand_tables_.get<int>(), static_cast<int>(out_blocks));
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchKvExpand(ep, stream));
  ap = kernels::WidenedView(ap, ep);
  return absl::OkStatus();
}

absl::Status ModelForward::Allocate(int t) {
  const size_t h = config_->hidden_size, inter = config_->intermediate_size;
  const size_t bf = sizeof(__nv_bfloat16);
  GEMMA_STATUS_RETURN_IF_ERROR(metadata_.Allocate(layout_.total * sizeof(int32_t)));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaMemset(metadata_.get(), 0, metadata_.bytes()));
  // cudaMemset runs on the legacy stream, which the backend's non-blocking
  // stream does not wait for: finish it before any launch reads the block.
  GEMMA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  GEMMA_STATUS_RETURN_IF_ERROR(residual_.Allocate(t * h * sizeof(float)));
  GEMMA_STATUS_RETURN_IF_ERROR(normed_.Allocate(t * h * bf));
  GEMMA_STATUS_RETURN_IF_ERROR(qkv_.Allocate(t * max_qkv_rows_ * bf));
  GEMMA_STATUS_RETURN_IF_ERROR(q_.Allocate(t * max_q_width_ * bf));
  GEMMA_STATUS_RETURN_IF_ERROR(attn_.Allocate(t * max_q_width_ * bf));
  GEMMA_STATUS_RETURN_IF_ERROR(proj_.Allocate(t * h * bf));
  GEMMA_STATUS_RETURN_IF_ERROR(partials_.Allocate(kernels::kMaxBranchParts * h * sizeof(float)));
  GEMMA_STATUS_RETURN_IF_ERROR(gate_up_.Allocate(t * 2 * inter * bf));
  GEMMA_STATUS_RETURN_IF_ERROR(act_.Allocate(t * inter * bf));
  // fp8 weights, or int4 ones with an fp8 copy (larger passes run on it):
  // the norms and the gelu gate can emit the codes those linears read.
  const DeviceMatrix& gate_up0 = weights_->layers()[0].gate_up;
  if (gate_up0.fp8() || (gate_up0.int4() && gate_up0.w4_fp8 != nullptr)) {
    GEMMA_STATUS_RETURN_IF_ERROR(normed_fp8_.Allocate(t * h));
    GEMMA_STATUS_RETURN_IF_ERROR(normed_scale_.Allocate(t * sizeof(float)));
    GEMMA_STATUS_RETURN_IF_ERROR(act_fp8_.Allocate(t * inter));
    GEMMA_STATUS_RETURN_IF_ERROR(act_scale_.Allocate(t * sizeof(float)));
  }
  GEMMA_STATUS_RETURN_IF_ERROR(rows_.Allocate(max_logit_rows_ * h * bf));
  GEMMA_STATUS_RETURN_IF_ERROR(logits_.Allocate(size_t{static_cast<size_t>(max_logit_rows_)} *
                                                config_->vocab_size * sizeof(float)));
  GEMMA_STATUS_RETURN_IF_ERROR(ids_.Allocate(max_logit_rows_ * sizeof(int32_t)));
  const size_t argmax_bytes = kernels::ArgmaxWorkspaceBytes(max_logit_rows_);
  GEMMA_STATUS_RETURN_IF_ERROR(argmax_workspace_.Allocate(argmax_bytes));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaMemset(argmax_workspace_.get<void>(), 0, argmax_bytes));  // argmax.h
  GEMMA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // the legacy stream, as above
  size_t ws = 256;
  // The cache's dtype is set when the pools are allocated, after this: room
  // for the split counts of both.
  for (int b = 1; b <= layout_.max_seqs; ++b) {
    for (const LayerSpec& s : config_->layers) {
      for (bool fp8 : {false, true})
        ws = std::max(ws, kernels::DecodeWorkspaceBytes(b, config_->num_heads, config_->max_head_dim(),
                                                        DecodeSplits(b, s, fp8)));
    }
  }
  GEMMA_STATUS_RETURN_IF_ERROR(attn_workspace_.Allocate(ws));
  return absl::OkStatus();
}

// Global layers (no window: keys grow with the context) fill every block slot
// of the multiprocessors. A sliding layer's few keys (1 024 at most) split as
// if two blocks shared a multiprocessor: its blocks are latency-bound, and
// twice the splits keep twice the tiles in flight (H200, batch 1, 31B window:
// 13.7 -> 10.6 us per layer with a bf16 cache, 12.5 -> 11.0 with E4M3; four
// per multiprocessor was slower than one).
int ModelForward::DecodeVariant(int head_dim, bool kv_fp8) const {
  const auto it = decode_variants_.find({head_dim, kv_fp8});
  return it == decode_variants_.end() ? -1 : it->second;
}

// attention-bench --batch-decode, the 31B's global layer over a bf16 cache,
// H200, µs per layer (tile decode, 33 splits -> keys from values, 66):
// batch 1 @131 072 281.7 -> 234.9, @512 11.6 -> 21.1; batch 64 @1 024
// 147.4 -> 119.3. Hence on by default only where contexts may be long.
bool ModelForward::KeysFromValues(const LayerSpec& s) const {
  using K = TuningSwitches::KeysFromValues;
  const K want = tuner_ != nullptr ? tuner_->switches().decode_keys_from_values : K::kAuto;
  return s.k_eq_v && (want == K::kOn || (want == K::kAuto && max_context_ >= TuningSwitches::kLongContextKeys));
}

bool ModelForward::NormOverCluster(int tokens, const kernels::ResidualNormParams& np) const {
  return tuner_ != nullptr && tuner_->switches().norm_cluster && tokens <= kernels::kClusterNormMaxTokens &&
         np.out_fp8 == nullptr;
}

int ModelForward::DecodeSplits(int num_seqs, const LayerSpec& s, bool kv_fp8) const {
  if (decode_splits_ > 0) return decode_splits_;
  constexpr int kSlidingBlocksPerSm = 2;
  const int variant = DecodeVariant(s.head_dim, kv_fp8);
  const int per_sm = !s.is_global() ? kSlidingBlocksPerSm
                     : variant >= 0 ? kernels::DecodeVariantBlocksPerSm(s.head_dim, kv_fp8, variant)
                                    : kernels::DecodeBlocksPerSm(s.head_dim, kv_fp8, KeysFromValues(s));
  return kernels::DecodeNumSplits(num_seqs, s.num_kv_heads, num_sms_, per_sm);
}

void ModelForward::EmitFp8(const DeviceMatrix& consumer, int m, int n, int k, uint8_t** codes, float** scales,
                          bool act) const {
  const bool on = normed_fp8_.get() != nullptr && linear_->TakesFp8Input(consumer, m, n, k);
  *codes = on ? (act ? act_fp8_ : normed_fp8_).get<uint8_t>() : nullptr;
  *scales = on ? (act ? act_scale_ : normed_scale_).get<float>() : nullptr;
}

LinearArgs ModelForward::WithFp8Input(LinearArgs a, const uint8_t* codes, const float* scales) {
  a.x_fp8 = codes;
  a.x_scale = scales;
  return a;
}

absl::Status ModelForward::SumOverRanks(__nv_bfloat16* x, int num_tokens, cudaStream_t stream) {
  if (all_reduce_ == nullptr) return absl::OkStatus();
  return all_reduce_->SumBf16(x, x, int64_t{num_tokens} * config_->hidden_size, stream);
}

absl::Status ModelForward::EnqueueLayers(const PassShape& shape, cudaStream_t stream) {
  const ModelConfig& c = *config_;
  kernels::EmbeddingParams ep;
  ep.token_ids = meta(layout_.token_ids);
  ep.table = weights_->embed();
  ep.out = residual_.get<float>();
  ep.num_tokens = shape.num_tokens;
  ep.hidden = c.hidden_size;
  ep.vocab = c.vocab_size;
  ep.scale = embed_scale_;
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchEmbedding(ep, stream));

  kernels::ResidualNormParams np;
  np.residual = residual_.get<float>();
  np.out_weight = weights_->layers()[0].input_norm;
  np.out = normed_.get<__nv_bfloat16>();
  np.num_tokens = shape.num_tokens;
  np.hidden = c.hidden_size;
  np.eps = c.rms_norm_eps;
  EmitFp8(weights_->layers()[0].qkv, shape.num_tokens, weights_->layers()[0].qkv_rows, c.hidden_size,
          &np.out_fp8, &np.out_scale, false);
  np.over_cluster = NormOverCluster(shape.num_tokens, np);
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchResidualNorm(np, stream));
  for (int l = 0; l < c.num_layers; ++l) {
    GEMMA_STATUS_RETURN_IF_ERROR(EnqueueLayer(l, shape, stream));
  }
  return absl::OkStatus();
}

absl::Status ModelForward::EnqueueAttention(int l, const PassShape& shape, cudaStream_t stream) {
  const ModelConfig& c = *config_;
  const LayerSpec& s = c.layers[l];
  const LayerKv& kv = cache_->layer(l);
  kernels::QkvRopeParams rp;
  rp.qkv = qkv_.get<__nv_bfloat16>();
  rp.q_norm = weights_->layers()[l].q_norm;
  rp.k_norm = weights_->layers()[l].k_norm;
  rp.positions = meta(layout_.positions);
  rp.token_slot = meta(layout_.token_slot);
  rp.q_out = q_.get<__nv_bfloat16>();
  rp.k_cache = kv.k;
  rp.v_cache = kv.v;
  rp.kv_fp8 = cache_->fp8();
  rp.num_tokens = shape.num_tokens;
  rp.num_heads = c.num_heads;
  rp.num_kv_heads = s.num_kv_heads;
  rp.head_dim = s.head_dim;
  rp.k_eq_v = s.k_eq_v;
  rp.num_slots = 1;  // a pool is one run of num_blocks * block_size rows
  rp.capacity = kv.capacity;
  rp.kv_rows = meta(s.is_global() ? layout_.kv_row_global : layout_.kv_row_sliding);
  rp.rope_pairs = s.rope_pairs;
  rp.rope_theta = s.rope_theta;
  rp.eps = c.rms_norm_eps;
  kernels::AttentionParams ap;
  ap.q = q_.get<__nv_bfloat16>();
  ap.out = attn_.get<__nv_bfloat16>();
  ap.k_cache = kv.k;
  ap.v_cache = kv.v;
  ap.kv_fp8 = cache_->fp8();
  ap.num_slots = 1;
  ap.capacity = kv.capacity;
  ap.num_heads = c.num_heads;
  ap.num_kv_heads = s.num_kv_heads;
  ap.head_dim = s.head_dim;
  ap.window = s.is_global() ? 0 : c.sliding_window;
  ap.scale = 1.0f;
  ap.num_seqs = shape.num_seqs;
  ap.seq_slot = meta(layout_.seq_slot);
  ap.q_offsets = meta(layout_.q_offsets);
  ap.q_pos0 = meta(layout_.q_pos0);
  ap.max_q_len = shape.max_q_len;
  ap.block_tables = meta(layout_.tables);
  ap.table_offsets = meta(s.is_global() ? layout_.global_table_offsets : layout_.sliding_table_offsets);
  ap.block_size = cache_->block_size();
  ap.num_blocks = kv.num_blocks;
  // The fused decode kernel where it serves the step, unless a decode build or
  // split count was forced (GEMMA_DECODE_ATTENTION, decode_splits): those
  // A/B runs mean the split kernel.
  if (shape.max_q_len == 1 && !omit_.qkv_rope && tuner_ != nullptr && tuner_->switches().fused_decode &&
      decode_splits_ <= 0 && DecodeVariant(s.head_dim, cache_->fp8()) < 0 &&
      kernels::FusedDecodeRefusal(rp, ap).empty()) {
    const int splits = kernels::FusedDecodeSplits(shape.num_seqs, s.num_kv_heads, num_sms_);
    if (kernels::FusedDecodeClustersFit(splits)) {
      return KernelStatus(kernels::LaunchFusedDecode(rp, ap, splits, stream));
    }
  }
  if (!omit_.qkv_rope) GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchQkvRope(rp, stream));
  if (shape.max_q_len == 1) {
    if (KeysFromValues(s)) {
      ap.keys_from_values = weights_->layers()[l].k_norm;
      ap.rope_pairs = s.rope_pairs;
    }
    const int splits = DecodeSplits(shape.num_seqs, s, cache_->fp8());
    if (const int variant = DecodeVariant(s.head_dim, cache_->fp8()); variant >= 0) {
      return KernelStatus(
          kernels::LaunchDecodeAttentionVariant(ap, attn_workspace_.get(), splits, variant, stream));
    }
    return KernelStatus(kernels::LaunchDecodeAttention(ap, attn_workspace_.get(), splits, stream));
  }
  if (ap.kv_fp8) GEMMA_STATUS_RETURN_IF_ERROR(ExpandKvForPrefill(s, shape, ap, stream));
  auto tile = tuner_->PrefillAttentionTile(ap, stream);
  if (!tile.ok()) return tile.status();
  if (tile->empty()) return KernelStatus(kernels::LaunchPrefillAttention(ap, stream));
  return KernelStatus(kernels::LaunchPrefillAttentionWithConfig(ap, *tile, stream));
}

absl::Status ModelForward::RunLinear(const LinearArgs& a, cudaStream_t stream, LeftScales* left) {
  return omit_.linears ? absl::OkStatus() : linear_->Run(a, stream, left);
}

absl::Status ModelForward::EnqueueLayer(int l, const PassShape& shape, cudaStream_t stream) {
  const ModelConfig& c = *config_;
  const LayerSpec& s = c.layers[l];
  const DeviceLayer& w = weights_->layers()[l];
  const int t = shape.num_tokens, h = c.hidden_size, inter = c.intermediate_size;
  auto* normed = normed_.get<__nv_bfloat16>();
  // bf16 branch outputs. An fp32 branch (ResidualNormParams::branch_f32)
  // measured better prefill rows but a worse decode row on fortunes
  // (2026-11-30: 0.023-0.033 vs <= 0.018 at prompt 1 step 26): noise-level,
  // so the measured-green bf16 path stays (except a split int4 linear's
  // partial sums at batch 1, below, which are fp32).
  auto* proj = proj_.get<__nv_bfloat16>();
  uint8_t* codes = nullptr;  // the fp8 input of the next linear, when its producer wrote one
  float* scales = nullptr;
  EmitFp8(w.qkv, t, w.qkv_rows, h, &codes, &scales, false);  // written by the previous norm
  GEMMA_STATUS_RETURN_IF_ERROR(RunLinear(
      WithFp8Input({w.qkv, normed, qkv_.get<__nv_bfloat16>(), nullptr, t, w.qkv_rows, h}, codes, scales),
      stream));
  if (!omit_.attention) GEMMA_STATUS_RETURN_IF_ERROR(EnqueueAttention(l, shape, stream));
  // An fp8 GEMM whose sums would be scaled by a kernel of their own leaves
  // the scales to the kernel that reads them next (LeftScales). Not across
  // ranks: each rank's partial sums have their own weight scales.
  const bool left_scales = tuner_ != nullptr && tuner_->switches().fp8_left_scales;
  LeftScales o_left, down_left, gate_up_left;
  LeftScales* const to_norm = left_scales && all_reduce_ == nullptr ? &o_left : nullptr;
  // At batch 1 an int4 o_proj or down may write partial sums over shares of
  // K (a split tiling) for the norm to add (LinearDispatcher::Int4SplitParts).
  auto* partials = partials_.get<float>();
  auto split_parts = [&](const DeviceMatrix& m, int n, int k) {
    return all_reduce_ == nullptr && !omit_.linears ? linear_->Int4SplitParts(m, t, n, k) : 0;
  };
  auto run_branch = [&](LinearArgs a, int parts, LeftScales* left) {
    if (parts > 0) {
      a.out_bf16 = nullptr;
      a.out_f32 = partials;
      a.partial_sums = true;
    }
    return RunLinear(a, stream, left);
  };
  auto take_branch = [&](kernels::ResidualNormParams& np, int parts) {
    np.branch = parts > 0 ? nullptr : proj;
    np.branch_f32 = parts > 0 ? partials : nullptr;
    np.branch_parts = std::max(parts, 1);
  };
  const int q_width = c.num_heads * s.head_dim;
  const int o_parts = split_parts(w.o_proj, h, q_width);
  GEMMA_STATUS_RETURN_IF_ERROR(
      run_branch({w.o_proj, attn_.get<__nv_bfloat16>(), proj, nullptr, t, h, q_width}, o_parts, to_norm));
  GEMMA_STATUS_RETURN_IF_ERROR(SumOverRanks(proj, t, stream));

  kernels::ResidualNormParams np;
  take_branch(np, o_parts);
  np.branch_col_scale = o_left.col;
  np.branch_token_scale = o_left.token;
  np.branch_weight = w.post_attention_norm;
  np.residual = residual_.get<float>();
  np.out_weight = w.pre_feedforward_norm;
  np.out = normed;
  np.num_tokens = t;
  np.hidden = h;
  np.eps = c.rms_norm_eps;
  np.launch_next_early = tuner_ != nullptr && tuner_->switches().norm_early_launch && shape.max_q_len == 1 &&
                         t <= TuningSwitches::kNormEarlyLaunchTokens;
  EmitFp8(w.gate_up, t, 2 * inter, h, &np.out_fp8, &np.out_scale, false);
  np.over_cluster = NormOverCluster(t, np);
  if (!omit_.norms) GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchResidualNorm(np, stream));

  kernels::GeluGateParams gp{gate_up_.get<__nv_bfloat16>(), act_.get<__nv_bfloat16>(), t, inter};
  EmitFp8(w.down_proj, t, h, inter, &gp.out_fp8, &gp.out_scale, true);
  if (gp.out_fp8 == nullptr && LinearDispatcher::FusesGeluGate(w.gate_up, t)) {
    // The W4A16 kernel writes gelu_tanh(gate) * up itself (paired tiling).
    LinearArgs a{w.gate_up, normed, act_.get<__nv_bfloat16>(), nullptr, t, 2 * inter, h};
    a.gelu_gate = true;
    GEMMA_STATUS_RETURN_IF_ERROR(RunLinear(a, stream));
  } else {
    GEMMA_STATUS_RETURN_IF_ERROR(RunLinear(
        WithFp8Input({w.gate_up, normed, gate_up_.get<__nv_bfloat16>(), nullptr, t, 2 * inter, h}, np.out_fp8,
                     np.out_scale),
        stream, left_scales ? &gate_up_left : nullptr));
    gp.in_col_scale = gate_up_left.col;
    gp.in_token_scale = gate_up_left.token;
    GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchGeluGate(gp, stream));
  }
  const int down_parts = split_parts(w.down_proj, h, inter);
  GEMMA_STATUS_RETURN_IF_ERROR(run_branch(
      WithFp8Input({w.down_proj, act_.get<__nv_bfloat16>(), proj, nullptr, t, h, inter}, gp.out_fp8, gp.out_scale),
      down_parts, to_norm != nullptr ? &down_left : nullptr));
  GEMMA_STATUS_RETURN_IF_ERROR(SumOverRanks(proj, t, stream));
  take_branch(np, down_parts);

  np.branch_col_scale = down_left.col;
  np.branch_token_scale = down_left.token;
  np.branch_weight = w.post_feedforward_norm;
  np.layer_scalar = w.layer_scalar;
  const bool last = l + 1 == c.num_layers;
  np.out_weight = last ? weights_->final_norm() : weights_->layers()[l + 1].input_norm;
  // The final norm emits no codes: the LM head reads bf16 rows gathered from
  // its output (an fp8 LM head quantizes them itself, or takes them as a16).
  const DeviceLayer* next = last ? nullptr : &weights_->layers()[l + 1];
  EmitFp8(next ? next->qkv : DeviceMatrix(), t, next ? next->qkv_rows : 0, h, &np.out_fp8, &np.out_scale, false);
  np.over_cluster = NormOverCluster(t, np);
  if (omit_.norms) return absl::OkStatus();
  return KernelStatus(kernels::LaunchResidualNorm(np, stream));
}

absl::Status ModelForward::EnqueueLogits(int begin, int count, bool argmax, cudaStream_t stream) {
  if (count <= 0 || count > max_logit_rows_) return absl::InternalError("bad logits row count");
  const ModelConfig& c = *config_;
  kernels::GatherRowsParams gp;
  gp.src = normed_.get<__nv_bfloat16>();
  gp.rows = meta(layout_.logit_rows) + begin;
  gp.dst = rows_.get<__nv_bfloat16>();
  gp.num_rows = count;
  gp.width = c.hidden_size;
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchGatherRows(gp, stream));
  LinearArgs la{weights_->lm_head(), rows_.get<__nv_bfloat16>(), nullptr, logits_.get<float>(),
                count, c.vocab_size, c.hidden_size, c.final_logit_softcap};
  GEMMA_STATUS_RETURN_IF_ERROR(linear_->Run(la, stream));
  if (!argmax) return absl::OkStatus();
  kernels::ArgmaxParams ap{logits_.get<float>(), ids_.get<int32_t>(), count, c.vocab_size,
                           argmax_workspace_.get<void>()};
  return KernelStatus(kernels::LaunchArgmax(ap, stream));
}

}  // namespace gemma::cuda
