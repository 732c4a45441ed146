// Which decode build runs over an E4M3 cache where it is not
// KernelTable::decode's (decode_variants.cu).
#pragma once

#include "kernels/attention/kernel_params.h"

namespace gemma::kernels::attention {

// The decode build over an E4M3 cache for head_dim where one of the
// alternative builds replaces KernelTable::decode's (256 and 512: a key-rows
// build); else nullptr.
const KernelEntry* Fp8DecodeDefault(int head_dim);

}  // namespace gemma::kernels::attention
