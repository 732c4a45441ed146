#include "kernels/attention/launch_common.h"

#include <cmath>

namespace gemma::kernels::attention {

std::string ValidateParams(const AttentionParams& p, bool decode) {
  const char* who = decode ? "decode attention: " : "prefill attention: ";
  auto fail = [&](const std::string& what) { return who + what; };
  if (p.q == nullptr || p.out == nullptr || p.k_cache == nullptr || p.v_cache == nullptr)
    return fail("q, out, k_cache and v_cache must be set");
  const bool paged = p.block_tables != nullptr;
  if ((!paged && p.seq_slot == nullptr) || p.q_offsets == nullptr || p.q_pos0 == nullptr)
    return fail("seq_slot (slot caches), q_offsets and q_pos0 must be set");
  if (paged) {
    if (p.table_offsets == nullptr) return fail("a paged cache needs table_offsets");
    if (p.block_size <= 0 || (p.block_size & (p.block_size - 1)) != 0)
      return fail("block_size must be a power of two, got " + std::to_string(p.block_size));
    if (p.num_blocks <= 0) return fail("num_blocks must be positive, got " + std::to_string(p.num_blocks));
    if (p.ring) return fail("a paged cache is not a ring");
    if (!p.length_aware) return fail("a paged cache is always read length-aware");
  }
  if (TableForHeadDim(p.head_dim) == nullptr && PaddedTableForHeadDim(p.head_dim) == nullptr)
    return fail("unsupported head_dim " + std::to_string(p.head_dim) + " (multiples of 16 up to " +
                std::to_string(kMaxHeadDim) + ")");
  if (p.num_heads <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0)
    return fail("num_heads (" + std::to_string(p.num_heads) +
                ") must be a positive multiple of num_kv_heads (" +
                std::to_string(p.num_kv_heads) + ")");
  const int group = p.num_heads / p.num_kv_heads;
  if (decode && group > 16)
    return fail("GQA group " + std::to_string(group) + " exceeds 16 heads per KV head");
  if (!paged && (p.num_slots <= 0 || p.capacity <= 0))
    return fail("num_slots and capacity must be positive, got " + std::to_string(p.num_slots) +
                " and " + std::to_string(p.capacity));
  if (p.window < 0) return fail("window must be >= 0, got " + std::to_string(p.window));
  if (p.num_seqs <= 0 || p.num_seqs > 65535)
    return fail("num_seqs must be in [1, 65535], got " + std::to_string(p.num_seqs));
  if (p.max_q_len <= 0) return fail("max_q_len must be positive, got " + std::to_string(p.max_q_len));
  if (decode && p.max_q_len != 1)
    return fail("decode needs q_len == 1, got max_q_len " + std::to_string(p.max_q_len));
  if (p.ring) {
    if (p.window == 0) return fail("a ring cache needs a sliding window");
    if (static_cast<long>(p.capacity) < static_cast<long>(p.window) + p.max_q_len - 1)
      return fail("ring capacity " + std::to_string(p.capacity) + " < window + max_q_len - 1 = " +
                  std::to_string(static_cast<long>(p.window) + p.max_q_len - 1));
  }
  if (!std::isfinite(p.scale)) return fail("scale must be finite");
  if (p.keys_from_values != nullptr && (p.rope_pairs < 0 || 2 * p.rope_pairs > p.head_dim))
    return fail("keys_from_values needs rope_pairs in [0, head_dim / 2 = " + std::to_string(p.head_dim / 2) +
                "], got " + std::to_string(p.rope_pairs));
  return "";
}

KernelParams ToKernelParams(const AttentionParams& p) {
  KernelParams k{};
  k.q = p.q;
  k.out = p.out;
  k.k = static_cast<const __nv_bfloat16*>(p.k_cache);
  k.v = static_cast<const __nv_bfloat16*>(p.v_cache);
  k.kv_fp8 = p.kv_fp8;
  k.head_dim = p.head_dim;
  k.partial = nullptr;
  k.seq_slot = p.seq_slot;
  k.q_offsets = p.q_offsets;
  k.q_pos0 = p.q_pos0;
  k.num_slots = p.num_slots;
  k.capacity = p.capacity;
  k.num_heads = p.num_heads;
  k.num_kv_heads = p.num_kv_heads;
  k.group = p.num_heads / p.num_kv_heads;
  k.window = p.window;
  k.num_splits = 1;
  k.scale_log2 = p.scale * 1.4426950408889634f;
  k.ring = p.ring;
  k.length_aware = p.length_aware;
  k.block_tables = p.block_tables;
  k.table_offsets = p.table_offsets;
  k.block_shift = 0;
  while ((1 << k.block_shift) < p.block_size) ++k.block_shift;
  if (p.block_tables != nullptr) {
    k.num_slots = 1;
    k.capacity = p.num_blocks * p.block_size;
  }
  return k;
}

std::string LastLaunchError(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return "";
  return std::string(what) + ": launch failed: " + cudaGetErrorString(err);
}

}  // namespace gemma::kernels::attention
