// Attention kernels for Gemma 4: prefill (tiled flash attention, autotuned per
// head_dim) and decode (split-K flash decoding). Both read every sequence's
// length from device memory, so a captured CUDA graph replays at any depth and
// the work follows the real context.
//
// KV cache views, two kinds:
// - slots: K and V of one layer are [num_slots, capacity, num_kv_heads,
//   head_dim] bf16 (or E4M3: kv_fp8). With `ring`, position p lives at index p % capacity
//   (sliding layers; capacity >= window + longest prefill chunk - 1, so a
//   chunk's keys are all present after it is appended). Without, index p.
// - paged (block_tables set): K and V are [num_blocks * block_size,
//   num_kv_heads, head_dim]; position p of sequence i lives at row
//   block_tables[table_offsets[i] + p / block_size] * block_size
//   + p % block_size. Only positions inside the window are ever read, so a
//   sliding table's entries for blocks that left it are never looked at.
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace gemma::kernels {

struct AttentionParams {
  const __nv_bfloat16* q;      // [num_tokens, num_heads, head_dim], normed + roped
  __nv_bfloat16* out;          // [num_tokens, num_heads, head_dim]
  const void* k_cache;         // [num_slots, capacity, num_kv_heads, head_dim] bf16
  const void* v_cache;         // same layout as k_cache
  int num_slots = 0;
  int capacity = 0;            // tokens per slot
  bool ring = false;           // position p at p % capacity
  int num_heads = 0;
  int num_kv_heads = 0;        // q head h uses kv head h / (num_heads / num_kv_heads)
  int head_dim = 0;            // a multiple of 16 up to 512 (instances: 32, 64, 128, 256, 512;
                               // the others run the next larger one zero-padded, untuned)
  int window = 0;              // 0: causal only; else query t sees keys u with t - u < window
  float scale = 1.0f;          // Gemma 4: 1.0
  // Sequences (device arrays). Sequence i's queries are tokens
  // [q_offsets[i], q_offsets[i+1]) at positions q_pos0[i] + j; its keys are
  // positions [0, q_pos0[i] + q_len) (already appended to the cache).
  int num_seqs = 0;
  const int* seq_slot = nullptr;   // [num_seqs]
  const int* q_offsets = nullptr;  // [num_seqs + 1]
  const int* q_pos0 = nullptr;     // [num_seqs]
  int max_q_len = 0;               // host-side bound on any q_len (sizes the grid)
  // false: ignore the lengths' bounds and sweep the whole capacity with masking
  // (every K/V row is read). Only for benchmarks that show what awareness buys;
  // slot caches only.
  bool length_aware = true;
  // Paged view (device arrays; nullptr: the slot view above, and then
  // seq_slot/num_slots/capacity/ring describe the cache).
  const int* block_tables = nullptr;   // block ids of every sequence, back to back
  const int* table_offsets = nullptr;  // [num_seqs]: sequence i's first entry
  int block_size = 0;                  // power of two
  int num_blocks = 0;                  // blocks in the pool
  // The cache holds E4M3 codes (unit scale, one byte per element, same
  // layout; qkv_rope.h writes them): tiles are copied as bytes and each K /
  // V fragment is widened to bf16 in registers (exactly), so the math is the
  // bf16 kernels'.
  bool kv_fp8 = false;
  // Keys from values (decode; prefill ignores it): the layer's values are
  // its keys before the learned norm and RoPE (Gemma 4's global layers:
  // k = rope(w * v)), so K's unrotated dims are w * V. Given w ([head_dim]
  // fp32) and the rotated pairs (dims [0, rope_pairs) and [head_dim/2,
  // head_dim/2 + rope_pairs)), decode reads only K's rotated dims and V:
  // 5/8 of the bytes at head_dim 512 with 64 pairs. Only where the cache was
  // written so (qkv_rope.h with k_eq_v). Run over a bf16 cache at head_dim
  // 512 (a build of two blocks per multiprocessor, decode_default.h) with
  // rope_pairs a multiple of 8 up to 64; elsewhere K is read whole.
  const float* keys_from_values = nullptr;
  int rope_pairs = 0;
};

// Prefill / mixed chunks: any q_len >= 1.
// The tile configuration comes from the autotune cache for (GPU, head_dim, shape
// bucket); on a miss it is timed here once (this synchronizes the stream),
// unless the stream is capturing a graph (then the default configuration runs)
// or autotuning is off (env GEMMA_AUTOTUNE=0: always the default).
std::string LaunchPrefillAttention(const AttentionParams& params, cudaStream_t stream);

// Times every tile configuration that fits this GPU on `params` (real buffers:
// `out` is overwritten with the correct result) and caches the winner in
// memory and in the text file $GEMMA_AUTOTUNE_CACHE (default
// ~/.cache/gemma-serve/autotune.txt). Call at warm-up, outside graph capture:
// synchronizes the stream and fails while it is capturing. No-op when the
// bucket is already cached or autotuning is off.
std::string AutotunePrefillAttention(const AttentionParams& params, cudaStream_t stream);

// Names of the prefill tile configurations compiled for head_dim (one, the
// padded build, for a head_dim without an instance of its own; empty if the
// head_dim is unsupported), and a launch with one of them by name ("default":
// the fixed default). For tests and benchmarks.
// kv_fp8: only those with an E4M3-cache build (the others refuse such a cache).
std::vector<std::string> PrefillAttentionConfigs(int head_dim, bool kv_fp8 = false);
std::string LaunchPrefillAttentionWithConfig(const AttentionParams& params,
                                             const std::string& config, cudaStream_t stream);

// Decode: q_len == 1 for every sequence. `workspace` holds the split partials:
// DecodeWorkspaceBytes(...) bytes, allocated by the caller once.
size_t DecodeWorkspaceBytes(int max_seqs, int num_heads, int head_dim, int num_splits);
std::string LaunchDecodeAttention(const AttentionParams& params, void* workspace,
                                  int num_splits, cudaStream_t stream);
// A split count that fills `num_sms` multiprocessors for this batch: fixed per
// batch size, so one captured graph serves every depth. blocks_per_sm: how
// many decode blocks one multiprocessor runs at once (DecodeBlocksPerSm).
int DecodeNumSplits(int num_seqs, int num_kv_heads, int num_sms, int blocks_per_sm = 1);
// Decode blocks of head_dim's kernel one multiprocessor holds: 1 for the bf16
// cache; the E4M3 builds at head_dim >= 256 are sized for 2 (512) or 3 (256)
// so that their shorter pipelines still keep HBM busy.
// keys_from_values: of the build a bf16 cache's keys-from-values launch runs.
int DecodeBlocksPerSm(int head_dim, bool kv_fp8, bool keys_from_values = false);

// Alternative decode builds (head_dims 256 and 512; benchmarks, tests and
// GEMMA_DECODE_ATTENTION; the engine runs the default, one of them over an
// E4M3 cache) for one cache dtype: their names, a launch
// with variant `variant` of params.kv_fp8's list, and the blocks per
// multiprocessor its split count should assume.
std::vector<std::string> DecodeVariants(int head_dim, bool kv_fp8);
std::string LaunchDecodeAttentionVariant(const AttentionParams& params, void* workspace, int num_splits, int variant,
                                         cudaStream_t stream);
int DecodeVariantBlocksPerSm(int head_dim, bool kv_fp8, int variant);
// Whether that variant has a build for the cache dtype and, over a bf16
// cache, for the keys read whole or from values (some tile builds exist only
// in the keys-from-values form; the others read K whole when asked for it).
bool DecodeVariantServes(int head_dim, bool kv_fp8, int variant, bool keys_from_values);

}  // namespace gemma::kernels
