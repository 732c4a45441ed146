// Internal: the Hopper prefill kernel's candidates for the prefill tile
// table (hopper_prefill.cuh describes the kernel). Each is a KernelEntry
// like the tile kernel's (block_m query rows of one head per block), so the
// autotuner times it next to them per head_dim and shape bucket; it has no
// E4M3-cache build yet (launch_fp8 null: an E4M3 cache keeps the tile kernel).
#pragma once

#include "kernels/attention/kernel_params.h"

namespace gemma::kernels::attention {

// Appends the candidates compiled for head_dim (256 and 512; none for the
// others) to t.prefill; none when PrefillWgmmaEnabled() is false
// (GEMMA_PREFILL_WGMMA=0: A/B runs against the tile kernel alone).
void AddHopperPrefill(int head_dim, KernelTable& t);

}  // namespace gemma::kernels::attention
