// The W4A16 linear's Hopper (sm_90a) tilings for 1..64 rows: weights
// dequantized to bf16 in registers and multiplied by wgmma (w4a16_wgmma.cu).
// Internal to kernels/gemv: LaunchGemvW4 (gemv_w4a16.h) lists them after its
// mma.sync tilings, so callers pick them by variant index like any other.
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemv/gemv_w4a16.h"

namespace gemma::kernels::w4 {

struct WgmmaTiling {
  const char* name;
  int nt;  // n8 x tiles, as gemv_w4a16.cu's tilings: serves batches 8 (nt / 2) + 1 .. 8 nt
  void (*launch)(const GemvW4Params&, cudaStream_t);
};

// The tilings, and their count in *count (when not null).
const WgmmaTiling* WgmmaTilings(int* count);

}  // namespace gemma::kernels::w4
