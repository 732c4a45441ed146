// Prefill over an E4M3 KV cache through the bf16 kernels: the pages a pass's
// sequences read are widened into a bf16 scratch pool (every E4M3 value is a
// bf16 value, so attention over the copy computes the same function), with
// block tables renumbered onto the scratch. Widening one global layer's keys
// at depth 128K moves ~1.6 GB (~0.4 ms), while the bf16 prefill kernels run
// ~1.7x faster than the E4M3 ones on such a chunk (tens of ms).
//
// Sequence i's keys are positions [lo_i, q_pos0[i] + q_len_i): lo_i = 0, or
// with a window max(0, q_pos0[i] - window + 1) (attention.h's paged view).
// Its table entries from lo_i / block_size on are renumbered to scratch
// blocks base_i, base_i + 1, ... (base_i: the blocks of the sequences
// before it); entries before are set to -1 (never read). The caller sizes
// the scratch: KvExpandBlocks on the host gives what a pass needs.
// Validates, never allocates or synchronizes; returns "" or an error.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <span>
#include <string>

#include "kernels/attention/attention.h"

namespace gemma::kernels {

struct KvExpandParams {
  const void* k_cache = nullptr;          // E4M3 pools [num_blocks * block_size, num_kv_heads, head_dim]
  const void* v_cache = nullptr;
  __nv_bfloat16* k_out = nullptr;         // [out_blocks * block_size, num_kv_heads, head_dim]
  __nv_bfloat16* v_out = nullptr;
  int* tables_out = nullptr;              // same offsets as block_tables
  const int* block_tables = nullptr;      // attention.h's paged view (device)
  const int* table_offsets = nullptr;     // [num_seqs]
  const int* q_offsets = nullptr;         // [num_seqs + 1]
  const int* q_pos0 = nullptr;            // [num_seqs]
  int num_seqs = 0;
  int block_size = 0;                     // power of two
  int num_kv_heads = 0;
  int head_dim = 0;                       // multiple of 16
  int window = 0;                         // 0: every key from position 0
  int out_blocks = 0;                     // scratch blocks (the kernel never writes past them)
};

std::string LaunchKvExpand(const KvExpandParams& p, cudaStream_t stream);

// The widening of `paged` (an E4M3 paged view, attention.h) into a scratch
// of `out_blocks` pages, and the bf16 view of that scratch once widened.
KvExpandParams KvExpandOf(const AttentionParams& paged, __nv_bfloat16* k_out, __nv_bfloat16* v_out, int* tables_out,
                          int out_blocks);
AttentionParams WidenedView(const AttentionParams& paged, const KvExpandParams& expand);

// Scratch blocks a pass needs (host side, from host copies of the pass's
// q_pos0 and q_offsets): the sum over sequences of the blocks holding
// positions [lo_i, end_i), end_i = q_pos0[i] + q_offsets[i + 1] - q_offsets[i].
int64_t KvExpandBlocks(std::span<const int> q_pos0, std::span<const int> q_offsets, int block_size, int window);

}  // namespace gemma::kernels
