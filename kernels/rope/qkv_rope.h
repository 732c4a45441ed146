// Gemma 4 attention input preparation, fused with the KV-cache append.
// For each token of the fused QKV projection output:
//   q_h = rope(rms(q_h, q_norm))            -> q_out
//   k_j = rope(rms(k_j, k_norm))            -> k_cache
//   v_j = rms0(v_j)  (k_eq_v: rms0(raw k_j), before k_norm and RoPE) -> v_cache
// RoPE is rotate-half over `rope_pairs` frequency pairs: dim k pairs with dim
// k + head_dim/2 for k < rope_pairs, angle pos * theta^(-2k/head_dim); other
// dims pass unchanged (Gemma 4's proportional partial RoPE on global layers).
//
// Cache layout is attention.h's: [num_slots, capacity, num_kv_heads, head_dim]
// (bf16, or E4M3 with kv_fp8),
// position p at index p (or p % capacity with `ring`); or, with `kv_rows`, a
// paged pool [rows, num_kv_heads, head_dim] where token t's K/V go to row
// kv_rows[t] (-1: not written, e.g. the padding of a captured batch).
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
// Launched with PDL (kernels/common/pdl.cuh): positions, token_slot and
// kv_rows are read (and the RoPE angles computed) before waiting for the
// previous kernel, so they must come from the step's metadata, not from a
// kernel of the same step.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

namespace gemma::kernels {

struct QkvRopeParams {
  // [num_tokens, (num_heads + num_kv_heads * (k_eq_v ? 1 : 2)) * head_dim]: q | k | v
  const __nv_bfloat16* qkv = nullptr;
  const float* q_norm = nullptr;       // [head_dim]
  const float* k_norm = nullptr;       // [head_dim]
  const int* positions = nullptr;      // [num_tokens]
  const int* token_slot = nullptr;     // [num_tokens]
  __nv_bfloat16* q_out = nullptr;      // [num_tokens, num_heads, head_dim]
  void* k_cache = nullptr;             // [num_slots, capacity, num_kv_heads, head_dim] bf16
  void* v_cache = nullptr;             // same layout (or, kv_fp8: E4M3 codes, one byte each)
  int num_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;                    // multiple of 16, <= 512
  bool k_eq_v = false;
  int num_slots = 0;
  int capacity = 0;
  bool ring = false;
  int rope_pairs = 0;                  // <= head_dim / 2
  float rope_theta = 10000.0f;
  float eps = 1e-6f;
  const int* kv_rows = nullptr;        // [num_tokens] paged rows; nullptr: slot cache
  bool kv_fp8 = false;                 // K and V as E4M3 with unit scale, saturating (vLLM's
                                       // uncalibrated fp8 KV): both are RMS-normalized, O(1)
};

std::string LaunchQkvRope(const QkvRopeParams& p, cudaStream_t stream);

}  // namespace gemma::kernels
