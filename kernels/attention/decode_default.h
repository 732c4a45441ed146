// Which decode build runs over an E4M3 cache where it is not
// KernelTable::decode's (decode_variants.cu).
#pragma once

#include "kernels/attention/attention.h"
#include "kernels/attention/kernel_params.h"

namespace gemma::kernels::attention {

// The decode build over an E4M3 cache for head_dim and GQA group where one of
// the alternative builds replaces KernelTable::decode's (256 and 512 with
// groups of up to 8 query heads: a key-rows build); else nullptr.
const KernelEntry* Fp8DecodeDefault(int head_dim, int group);

// The build whose keys-from-values form decode runs over a bf16 cache at
// head_dim (512: a tile build of two blocks per multiprocessor), or nullptr.
inline constexpr const char* kKeysFromValuesDefault = "w4n32s2b2";
const KernelEntry* KeysFromValuesDecodeDefault(int head_dim);
// Whether `e` has a keys-from-values build that serves params: a bf16 cache,
// keys_from_values set, rope_pairs a multiple of 8 up to e.kfv_max_pairs, a
// GQA group of at most kKeysFromValuesMaxGroup heads.
bool ServesKeysFromValues(const KernelEntry& e, const AttentionParams& params);

// False for a key-rows build and a group above the 8 query heads per KV head
// it serves (its MMA's n8 columns); true otherwise.
bool DecodeBuildServesGroup(const KernelEntry& e, int group);

}  // namespace gemma::kernels::attention
