// Internal: the device-side parameter block of the attention tile kernel and
// the host-side table of its compiled tile configurations.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace gemma::kernels::attention {

struct KernelParams {
  const __nv_bfloat16* q;    // [num_tokens, num_heads, D]
  __nv_bfloat16* out;        // [num_tokens, num_heads, D] (num_splits == 1)
  const __nv_bfloat16* k;    // [num_slots, capacity, num_kv_heads, D]
  const __nv_bfloat16* v;    // (E4M3 bytes in the same layout when kv_fp8)
  float* partial;            // [num_seqs, num_heads, num_splits, D + 4] (num_splits > 1)
  const int* seq_slot;       // [num_seqs]
  const int* q_offsets;      // [num_seqs + 1]
  const int* q_pos0;         // [num_seqs]
  int num_slots, capacity, num_heads, num_kv_heads;
  int group;                 // num_heads / num_kv_heads
  int window;                // 0: causal only
  int heads_per_block;       // rows of one token: 1 (prefill) or group (decode)
  int tokens_per_block;      // BM / heads_per_block (prefill) or 1 (decode)
  int num_splits;            // key-range splits per (sequence, row tile)
  float scale_log2;          // scale * log2(e)
  bool ring, length_aware;
  // Paged cache (attention.h): k/v are [num_blocks * block_size, num_kv_heads, D].
  const int* block_tables;   // nullptr: slot cache
  const int* table_offsets;  // [num_seqs]
  int block_shift;           // log2(block_size)
  bool pdl = false;          // launched with programmatic dependent launch (decode)
  bool kv_fp8 = false;       // k / v hold E4M3 codes (unit scale): launch_fp8 instances only
  int head_dim = 0;          // of q, k, v, out: D, or below it for the padded builds
  // Keys from values (the launch_kfv builds): K's dims outside the rotated
  // ones ([0, rope_pairs) and [D/2, D/2 + rope_pairs)) equal kv_weight * V,
  // so only the rotated dims of K are read and the rest of Q K^T is
  // (kv_weight * Q) V^T. AttentionParams::keys_from_values says when.
  const float* kv_weight = nullptr;  // [D] fp32
  int rope_pairs = 0;                // a multiple of 8
};

// One compiled instance of the tile kernel.
struct KernelEntry {
  std::string name;          // e.g. "m64n32w8s2"
  int block_m, block_n, warps, stages, d_split;
  int threads, smem_bytes;
  cudaError_t (*setup)() = nullptr;  // raises the dynamic shared-memory limit
  void (*launch)(const KernelParams&, dim3 grid, cudaStream_t) = nullptr;
  // The configuration's build over an E4M3 cache (kv_fp8); null where not
  // compiled (tile_instances.cuh says which). The decode entry's E4M3 build
  // at D >= 256 has its own stages and occupancy: the fields above describe
  // the bf16 build.
  cudaError_t (*setup_fp8)() = nullptr;
  void (*launch_fp8)(const KernelParams&, dim3 grid, cudaStream_t) = nullptr;
  int fp8_blocks_per_sm = 1;   // blocks of the E4M3 build one multiprocessor holds
  int bf16_blocks_per_sm = 1;  // the same of the bf16 (and keys-from-values) builds
  // The bf16-cache build that reads keys from values (KernelParams::kv_weight);
  // null where not compiled. kfv_max_pairs: the most rotated pairs its
  // key stages hold.
  cudaError_t (*setup_kfv)() = nullptr;
  void (*launch_kfv)(const KernelParams&, dim3 grid, cudaStream_t) = nullptr;
  int kfv_max_pairs = 0;
};

struct KernelTable {
  std::vector<KernelEntry> prefill;  // autotune candidates, pruned at compile time
  int default_prefill = 0;           // index into prefill
  KernelEntry decode;                // block_m == 16: one row per head of a KV group
  // The decode shape for head_dims below D that have no instance (zero-padded
  // to D in shared memory); prefill and decode both run it.
  KernelEntry padded;
};

// Alternative decode builds of head_dim's kernel for one cache dtype (their
// launch, or launch_fp8 with kv_fp8; decode_variants.cu): empty for
// head_dims other than 256 and 512.
const std::vector<KernelEntry>& DecodeVariantTable(int head_dim, bool kv_fp8);

// Instances: 32, 64, 128, 256, 512; the other multiples of 16 up to 512 run
// the next larger one's padded build.
inline constexpr int kMaxHeadDim = 512;

// The one head_dim dispatch point: the table of head_dim's own instance, or
// nullptr.
const KernelTable* TableForHeadDim(int head_dim);
// For a multiple of 16 up to kMaxHeadDim without an instance of its own: the
// table whose `padded` entry runs it; else nullptr.
const KernelTable* PaddedTableForHeadDim(int head_dim);

}  // namespace gemma::kernels::attention
