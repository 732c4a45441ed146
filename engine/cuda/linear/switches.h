// The GEMMA_* environment switches of the CUDA backend's kernel choices,
// parsed in one place (docs/tuning.md lists every one; Names() is the list
// a test holds the document to). They are A/B and debugging knobs: the
// defaults are what serving runs. Read when the backend's Tuner is created
// (tuner.h), which hands them to the paths it tunes and to the autotune
// cache file.
// Thread-safety: plain data; FromEnv only reads the environment.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace gemma::cuda {

// The largest decode batch the wgmma FP8 linear serves (WgmmaPath::kMaxM).
inline constexpr int kWgmmaFp8MaxM = 64;

enum class WgmmaPreference {
  kMeasured,  // the faster of wgmma and the baseline, as timed
  kOff,       // the baseline only (GEMV / cuBLASLt)
  kForce,     // wgmma wherever a candidate was timed (tests, A/B)
};

struct TuningSwitches {
  // GEMMA_AUTOTUNE (default 1): 0 keeps no autotune cache (every start-up
  // re-times the linears; attention takes its fixed default tiles).
  bool autotune = true;
  // GEMMA_AUTOTUNE_CACHE (default $HOME/.cache/gemma-serve/autotune.txt):
  // the autotune cache file.
  std::string autotune_cache;
  // GEMMA_FP8_A16 (default 1): 0 leaves the fp8 GEMVs that read bf16 x
  // (a16) out of autotuning.
  bool fp8_a16 = true;
  // GEMMA_FP8_WGMMA (default 1 = kMeasured): 0 = kOff, force = kForce.
  WgmmaPreference fp8_wgmma = WgmmaPreference::kMeasured;
  // GEMMA_FP8_WGMMA_SHAPES (default empty = all): comma-separated "NxK"
  // shapes the wgmma FP8 linear may serve.
  std::set<std::string> fp8_wgmma_shapes;
  // GEMMA_FP8_WGMMA_MAX_M (default kWgmmaFp8MaxM = 64): the largest decode
  // batch the wgmma FP8 linear may serve; 0..64.
  int fp8_wgmma_max_m = kWgmmaFp8MaxM;
  // GEMMA_FP8_OUTER_VEC (default 1): 0 keeps cuBLASLt's FP8 GEMMs off the
  // outer-vector scale mode (the scales then go through our epilogue).
  bool fp8_outer_vec = true;
  // GEMMA_FP8_FAST_ACCUM (default 1): 0 makes FP8 GEMMs promote partial sums
  // to fp32 (and the wgmma linear use only its promoting variants).
  bool fp8_fast_accum = true;
  // GEMMA_INT4_FP8_COPY (default 1): --weights int4 keeps an fp8 copy of
  // each layer matrix (E4M3 with per-row scales of the dequantized values)
  // and passes above 16 rows (prefill, large decode batches) run the fp8
  // path on it; the bf16 matrices are freed. 0 hands the choice to
  // GEMMA_INT4_BF16_COPY.
  bool int4_fp8_copy = true;
  // GEMMA_INT4_BF16_COPY (default 1; read only with GEMMA_INT4_FP8_COPY=0):
  // keeps each layer matrix's dequantized bf16 copy for passes above 16
  // rows (twice the fp8 copy's bytes, the int4 values exactly); 0 frees it
  // and such passes dequantize per call.
  bool int4_bf16_copy = true;
  // GEMMA_INT4_GELU_GATE (default 1): --weights int4 tiles each fused
  // gate|up matrix paired (kernels/gemv/gemv_w4a16.h), so the W4A16 kernel
  // writes gelu_tanh(gate) * up itself and the gelu gate kernel does not run
  // where that kernel serves the pass; 0 tiles it plainly (A/B runs).
  bool int4_gelu_gate = true;
  // GEMMA_FP8_KV_PREFILL_BF16 (default 1): prefill over an E4M3 KV cache
  // widens the pages each pass reads into a bf16 scratch and runs the bf16
  // attention kernels on it (kernels/attention/kv_expand.h); 0 runs the
  // E4M3 kernels on the cache.
  bool fp8_kv_prefill_bf16 = true;
  // GEMMA_PREFILL_WGMMA (default 1): 0 leaves the Hopper wgmma prefill
  // attention candidates out of the prefill tables (A/B runs against the
  // tile kernel).
  bool prefill_wgmma = true;
  // GEMMA_DECODE_KEYS_FROM_VALUES (default auto): decode over a bf16 cache
  // reads only the rotated dims of a k_eq_v layer's keys and takes the rest
  // from its values (kernels/attention/attention.h, keys_from_values;
  // head_dim 512). auto: when a sequence may hold kLongContextKeys or more
  // (its build splits a sequence's keys twice as finely, which costs at
  // short depths at batch 1); 1: always; 0: never.
  static constexpr int kLongContextKeys = 32768;
  enum class KeysFromValues { kAuto, kOn, kOff };  // "auto", "1", "0", in this order (FromEnv)
  KeysFromValues decode_keys_from_values = KeysFromValues::kAuto;
  // GEMMA_DECODE_ATTENTION (default empty: the default builds): names of
  // alternative decode attention builds (kernels::DecodeVariants, e.g.
  // "kr-w2s3b2,kr-w2s3b4"), comma-separated; each head_dim and cache dtype
  // runs the first of them it has (the others keep the default).
  std::string decode_attention;
  // GEMMA_FP8_LEFT_SCALES (default 1; 0 turns it off): an fp8 GEMM whose
  // sums cuBLASLt leaves unscaled (decode batches of 9..128 rows;
  // LinearDispatcher::Run's LeftScales) hands its weight and token scales
  // to the kernel that reads the output next (the gelu gate, the residual
  // norm) instead of scaling them in a kernel of its own.
  bool fp8_left_scales = true;
  // GEMMA_NORM_EARLY_LAUNCH (default 1; 0 turns it off): the residual
  // norms after each layer's attention and MLP in a decode step of up to
  // kNormEarlyLaunchTokens tokens let the next kernel (a GEMV; after the
  // last layer, the LM head's row gather) launch before their own wait
  // instead of after it (ResidualNormParams::launch_next_early). The norm
  // after the embedding launches its successor after its wait.
  static constexpr int kNormEarlyLaunchTokens = 4;
  bool norm_early_launch = true;
  // GEMMA_FUSED_DECODE (default 1; 0 turns it off): a decode step of one or
  // two sequences (kernels::kFusedDecodeMaxSeqs) runs QKV-RoPE, attention
  // and the split merge of each layer it serves as one kernel
  // (kernels/attention/decode_fused.h: head_dim 256 over a bf16 cache, the
  // sliding layers of the 31B) instead of three.
  bool fused_decode = true;
  // GEMMA_NORM_CLUSTER (default 1; 0 turns it off): the residual norms of a
  // pass of up to kernels::kClusterNormMaxTokens tokens that write no fp8
  // codes spread each token over a cluster of 8 blocks instead of one block
  // (kernels::ResidualNormParams::over_cluster).
  bool norm_cluster = true;
  // GEMMA_INT4_SPLIT_K (default 1; 0 turns it off; force): at batch 1, an
  // int4 o_proj or down (without tensor parallelism) may run a split W4A16
  // tiling that writes partial sums over shares of K, which the residual
  // norm after it adds (kernels::GemvW4Params::partial_sums,
  // ResidualNormParams::branch_parts), where the tuner measured one faster
  // than the best whole tiling by LinearDispatcher::kInt4SplitMarginMs;
  // force: the fastest split tiling wherever one serves (tests).
  enum class Int4SplitK { kOff, kMeasured, kForce };  // "0", "1", "force", in this order (FromEnv)
  Int4SplitK int4_split_k = Int4SplitK::kMeasured;

  // Parsed from the environment; a malformed value is logged and the
  // default kept.
  static TuningSwitches FromEnv();
  // The name of every switch FromEnv reads.
  static std::vector<std::string> Names();
};

}  // namespace gemma::cuda
