// Tensor-core tilings of the decode GEMV for batch 2..8 (internal to
// kernels/gemv; callers go through LaunchGemv with a variant index).
//
// At batch 8 the CUDA-core GEMV spends 8 bf16->fp32 conversions and FMAs per
// weight element and becomes ALU-bound; here each warp feeds 16 weight rows x
// 16 k straight from its 16-byte streaming loads into mma.sync m16n8k16
// (bf16 in, fp32 accumulate) against the batch rows of x padded to 8, so the
// step stays a stream of the weights whatever the batch.
#pragma once

#include <cuda_runtime.h>

#include "kernels/gemv/gemv.h"

namespace gemma::kernels::internal {

// t1u8k4: within about 3 % of the fastest tiling on every 31B shape at batch
// 2..8 (H200, 2026-11-30); used when no tuned variant is given.
constexpr int kGemvMmaDefaultTiling = 7;

int NumGemvMmaTilings();
const char* GemvMmaTilingName(int tiling);
// REQUIRES: p validated by LaunchGemv, 0 <= tiling < NumGemvMmaTilings().
// Enqueues only; the caller reads the launch error.
void LaunchGemvMma(const GemvParams& p, int tiling, cudaStream_t stream);

}  // namespace gemma::kernels::internal
