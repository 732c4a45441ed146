// Which decode build runs over an E4M3 cache where it is not
// KernelTable::decode's (decode_variants.cu).
#pragma once

#include "kernels/attention/kernel_params.h"

namespace gemma::kernels::attention {

// The decode build over an E4M3 cache for head_dim and GQA group where one of
// the alternative builds replaces KernelTable::decode's (256 and 512 with
// groups of up to 8 query heads: a key-rows build); else nullptr.
const KernelEntry* Fp8DecodeDefault(int head_dim, int group);

// False for a key-rows build and a group above the 8 query heads per KV head
// it serves (its MMA's n8 columns); true otherwise.
bool DecodeBuildServesGroup(const KernelEntry& e, int group);

}  // namespace gemma::kernels::attention
