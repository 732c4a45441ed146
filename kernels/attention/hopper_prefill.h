// Internal: the Hopper prefill kernel's candidates for the prefill tile
// table (hopper_prefill.cuh describes the kernel). Each is a KernelEntry
// like the tile kernel's (block_m query rows of one head per block), so the
// autotuner times it next to them per head_dim and shape bucket. The
// candidates that hold at least half of Q in registers (q8, q12) have an
// E4M3-cache build too (launch_fp8).
#pragma once

#include "kernels/attention/kernel_params.h"

namespace gemma::kernels::attention {

// Appends the candidates compiled for head_dim (256 and 512; none for the
// others) to t.prefill; none when PrefillWgmmaEnabled() is false
// (GEMMA_PREFILL_WGMMA=0: A/B runs against the tile kernel alone).
void AddHopperPrefill(int head_dim, KernelTable& t);

}  // namespace gemma::kernels::attention
