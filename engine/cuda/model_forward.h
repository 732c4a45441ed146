// Enqueues the Gemma 4 forward of one pass on a stream: embedding, the
// decoder layers, and logits for chosen rows. Every per-pass array lives in a
// fixed device metadata block and every size is an argument, so a decode pass
// can be captured once per batch size and replayed with new metadata.
// Thread-safety: owned by the backend's thread.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "engine/cuda/comm/all_reduce.h"
#include "engine/cuda/common/cuda_util.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/kv_cache.h"
#include "engine/cuda/linear/linear.h"
#include "engine/cuda/omitted_launches.h"
#include "engine/cuda/step_plan.h"
#include "engine/model/config.h"
#include "kernels/attention/attention.h"
#include "kernels/norm/residual_norm.h"

namespace gemma::cuda {

struct PassShape {
  int num_tokens = 0;
  int num_seqs = 0;
  int max_q_len = 0;  // 1: decode attention
  // The plan's positions (host copies, for prefill passes over an E4M3
  // cache: the bf16 scratch they need); empty: not known.
  std::span<const int32_t> q_pos0, q_offsets;
};

// What the KV pools will be (they may be created after the ModelForward).
struct PoolPlan {
  int max_context = 0;  // tokens per sequence
  int block_size = 16;
  bool kv_fp8 = false;  // E4M3 pools
};

class ModelForward {
 public:
  // `max_tokens` and `max_seqs` bound a pass; `max_logit_rows` one EnqueueLogits call;
  // `decode_splits` > 0 overrides the decode attention split count;
  // `max_table_entries` sizes the block tables of a pass (the pools in
  // `cache` may be created after this object). With E4M3 pools (`pools`),
  // prefill widens the pages a pass reads into a bf16 scratch for up to
  // max_context keys and runs the bf16 attention on it
  // (kernels/attention/kv_expand.h), unless GEMMA_FP8_KV_PREFILL_BF16=0.
  static absl::StatusOr<std::unique_ptr<ModelForward>> Create(const ModelConfig& config,
                                                             const DeviceWeights* weights,
                                                             KvCache* cache, LinearDispatcher* linear,
                                                             Tuner* tuner,
                                                             int max_tokens, int max_seqs,
                                                             int max_logit_rows,
                                                             int decode_splits, float embed_scale,
                                                             int max_table_entries, const PoolPlan& pools);

  const MetadataLayout& layout() const { return layout_; }
  int32_t* metadata() const { return metadata_.get<int32_t>(); }  // device block
  int max_logit_rows() const { return max_logit_rows_; }

  // Embedding and every layer; leaves the final-normed hidden states.
  absl::Status EnqueueLayers(const PassShape& shape, cudaStream_t stream);
  // Logits (fp32, softcapped) of logit rows [begin, begin + count) into
  // logits(); with `argmax` also their greedy ids into ids().
  absl::Status EnqueueLogits(int begin, int count, bool argmax, cudaStream_t stream);
  const float* logits() const { return logits_.get<float>(); }
  // Tensor parallelism: o_proj's and down_proj's outputs are this rank's
  // partial sums; `all_reduce` adds the ranks' up (in place) before the
  // residual norm reads them. Null (one GPU): nothing is added.
  void set_all_reduce(AllReduce* all_reduce) { all_reduce_ = all_reduce; }
  // Timing only: kinds of launch left out of every pass (wrong outputs).
  void set_omitted_launches(const OmittedLaunches& omit) { omit_ = omit; }
  const int32_t* ids() const { return ids_.get<int32_t>(); }

 private:
  ModelForward() = default;
  absl::Status Allocate(int max_tokens);
  absl::Status EnqueueLayer(int l, const PassShape& shape, cudaStream_t stream);
  // A layer's linear through linear_, or nothing under omit_.linears.
  absl::Status RunLinear(const LinearArgs& a, cudaStream_t stream, LeftScales* left = nullptr);
  absl::Status EnqueueAttention(int l, const PassShape& shape, cudaStream_t stream);
  // Split-K partitions of decode attention: fixed per batch size, so a
  // captured graph serves every depth.
  int DecodeSplits(int num_seqs, const LayerSpec& s, bool kv_fp8) const;
  // Whether decode reads layer s's keys from its values
  // (kernels::AttentionParams::keys_from_values; GEMMA_DECODE_KEYS_FROM_VALUES).
  bool KeysFromValues(const LayerSpec& s) const;
  // The alternative decode build GEMMA_DECODE_ATTENTION names for this
  // head_dim and cache dtype (its index in kernels::DecodeVariants), or -1.
  int DecodeVariant(int head_dim, bool kv_fp8) const;
  // Whether a pass of `tokens` runs residual norm `np` over a cluster of
  // blocks per token (kernels::ResidualNormParams::over_cluster;
  // GEMMA_NORM_CLUSTER): not where it also writes fp8 codes (fp8 weights at
  // batch 1 measured no faster with it: a third reduction over the cluster).
  bool NormOverCluster(int tokens, const kernels::ResidualNormParams& np) const;
  int32_t* meta(int offset) const { return metadata() + offset; }
  // fp8 weights: the producer of a linear's input (a norm, the gelu gate)
  // also writes its E4M3 codes and per-token scales when the linear (m x k
  // -> n) would read them (LinearDispatcher::TakesFp8Input), so it need not
  // quantize x itself; else *codes = *scales = nullptr.
  void EmitFp8(const DeviceMatrix& consumer, int m, int n, int k, uint8_t** codes, float** scales,
               bool act) const;
  static LinearArgs WithFp8Input(LinearArgs a, const uint8_t* codes, const float* scales);
  absl::Status SumOverRanks(__nv_bfloat16* x, int num_tokens, cudaStream_t stream);
  absl::Status AllocateKvExpand(const PoolPlan& pools, int max_tokens);
  // Prefill over an E4M3 cache: widens the pages layer `s` reads in this
  // pass into the bf16 scratch and points `ap` at it; leaves `ap` alone
  // when the scratch is off or too small for the pass.
  absl::Status ExpandKvForPrefill(const LayerSpec& s, const PassShape& shape, kernels::AttentionParams& ap,
                                  cudaStream_t stream);

  const ModelConfig* config_ = nullptr;
  const DeviceWeights* weights_ = nullptr;
  KvCache* cache_ = nullptr;
  LinearDispatcher* linear_ = nullptr;
  Tuner* tuner_ = nullptr;  // prefill attention tiles
  AllReduce* all_reduce_ = nullptr;
  OmittedLaunches omit_;
  MetadataLayout layout_;
  int max_logit_rows_ = 0;
  int decode_splits_ = 0;  // 0: the attention kernels' choice
  std::map<std::pair<int, bool>, int> decode_variants_;  // (head_dim, kv_fp8) -> DecodeVariant
  float embed_scale_ = 1.0f;
  int num_sms_ = 1;
  int max_context_ = 0;  // keys one sequence may hold (PoolPlan)
  int max_qkv_rows_ = 0;
  int max_q_width_ = 0;

  DeviceBuffer metadata_;
  DeviceBuffer residual_;   // fp32 [T, H]
  DeviceBuffer normed_;     // bf16 [T, H]: input of the next linear
  DeviceBuffer qkv_;        // bf16 [T, max_qkv_rows]
  DeviceBuffer q_;          // bf16 [T, heads * D]
  DeviceBuffer attn_;       // bf16 [T, heads * D]
  DeviceBuffer proj_;       // bf16 [T, H]: o_proj / down_proj output
  DeviceBuffer partials_;   // fp32 [kMaxBranchParts, H]: their partial sums at batch 1 (GEMMA_INT4_SPLIT_K)
  DeviceBuffer gate_up_;    // bf16 [T, 2I]
  DeviceBuffer act_;        // bf16 [T, I]
  DeviceBuffer normed_fp8_;    // E4M3 [T, H] + fp32 [T] scales: normed_ for fp8 weights
  DeviceBuffer normed_scale_;
  DeviceBuffer act_fp8_;       // E4M3 [T, I] + fp32 [T] scales: act_ for fp8 weights
  DeviceBuffer act_scale_;
  DeviceBuffer rows_;       // bf16 [max_logit_rows, H]
  DeviceBuffer logits_;     // fp32 [max_logit_rows, V]
  DeviceBuffer ids_;        // int32 [max_logit_rows]
  DeviceBuffer argmax_workspace_;  // kernels/sampling/argmax.h, zero-filled
  DeviceBuffer attn_workspace_;
  DeviceBuffer expand_k_, expand_v_;  // bf16 scratch pools (kv_expand.h), expand_elems_ each
  DeviceBuffer expand_tables_;        // int32 [max_table_entries]
  int64_t expand_elems_ = 0;
  int max_table_entries_ = 0;
};

}  // namespace gemma::cuda
