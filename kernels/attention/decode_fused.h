// Decode attention fused with its input preparation, for steps of one token
// per sequence over a paged bf16 cache: one kernel does what QKV-RoPE
// (kernels/rope/qkv_rope.h), the split decode kernel and the split merge
// (attention.h) do in three.
//
// Grid (KV heads, splits, sequences); the splits of one (KV head, sequence)
// form a thread-block cluster. Every block normalizes and rotates its GQA
// group's queries itself, from the QKV projection's output, with the bits
// QKV-RoPE writes; the block that holds the sequence's newest position also
// makes that position's K and V rows and writes them to the cache. Each warp
// sweeps its own 16-key chunks of the block's share of the live keys (keys
// as the MMA's rows, the group's heads as its columns) with an online
// softmax of its own, and the cluster merges its warps' partials through
// distributed shared memory, so no block waits on another before the merge
// and no partial goes through global memory. The grid is fixed by the batch:
// a captured graph replays at any depth.
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/attention/attention.h"
#include "kernels/rope/qkv_rope.h"

namespace gemma::kernels {

// Why the fused kernel cannot serve this decode step ("" when it can):
// `rope` and `attn` as the separate launches would take them, with every
// sequence's query length 1 (max_q_len 1). It serves head_dim 256 over a
// paged bf16 cache, sliding windows of up to kFusedDecodeMaxWindow keys (a
// block sweeps window / splits keys, one chunk per warp at a time: a global
// layer's keys would grow with the context), GQA groups of up to 8 query
// heads, and up to kFusedDecodeMaxSeqs sequences: int4 31B on an
// H100, gemma-bench --batches, ms a step at contexts 1 024 / 8 192, three
// kernels -> fused: batch 1 8.22 -> 7.97 / 8.35 -> 8.11, batch 2 9.25 ->
// 8.91 / 9.62 -> 9.30, batch 4 10.41 -> 10.64 / 11.15 -> 11.35 (a block then
// sweeps a quarter of a window, one chunk per warp at a time), batch 8
// 13.21 -> 13.47.
inline constexpr int kFusedDecodeMaxSeqs = 2;
inline constexpr int kFusedDecodeMaxWindow = 4096;
std::string FusedDecodeRefusal(const QkvRopeParams& rope, const AttentionParams& attn);

// Splits per (KV head, sequence): the cluster size, fixed by the batch
// (fills num_sms multiprocessors at one block each; 1..8).
int FusedDecodeSplits(int num_seqs, int num_kv_heads, int num_sms);
// Whether this device can run a cluster of num_splits of its blocks (a GPU
// partitioned so that no cluster fits runs the three kernels instead).
// Asked once per device and split count.
bool FusedDecodeClustersFit(int num_splits);

// The fused step: q, the newest K / V rows (written to the cache at
// rope.kv_rows) and attn.out. attn.q is not read; rope.q_out is not written.
// A token's position is its sequence's attn.q_pos0 (rope.positions is not
// read: a decode step's are the same).
std::string LaunchFusedDecode(const QkvRopeParams& rope, const AttentionParams& attn, int num_splits,
                              cudaStream_t stream);

}  // namespace gemma::kernels
