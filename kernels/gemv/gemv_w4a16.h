// Linear layer on 4-bit weights with bf16 activations (W4A16) for 1..64
// tokens (decode batches and short passes):
//   out[b, n] = sum_g scale[n, g] * sum_{k in group g} (u[n, k] - 8) * x[b, k]
// u in 0..15, one fp16 scale per (row, group of 32 input columns): GGML's
// Q4_0 (group-128 checkpoints repeat their scale over four groups).
//
// Weights are in the tiled device layout below, made from the row layout of
// engine/model/quantization_int4.h (PackForDevice on the host, or
// LaunchQuantizeQ4_0 on the device) by LaunchTileW4 (kernels/quant/w4_quant.h).
//
// The tiled layout (and the paired tiling of a fused gate|up matrix) is
// kernels/quant/w4_layout.h's.
//
// Structure: lane (g, t) of a warp multiplies its rows' codes against x rows
// 8j + g (n8 tiles j < NT) with mma.sync, per 32-group into zeroed partials
// that are scaled into fp32 accumulators; warps split K (KS) and rows (RT
// tiles per warp), the next super-chunks' loads fly during the MMAs.
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/quant/w4_layout.h"

namespace gemma::kernels {

inline constexpr int kW4MaxBatch = 64;

struct GemvW4Params {
  const uint8_t* w = nullptr;         // tiled codes (W4TiledCodeBytes)
  const __half* scales = nullptr;     // tiled scales (W4TiledScaleBytes)
  const __nv_bfloat16* x = nullptr;   // [batch, k]
  __nv_bfloat16* out_bf16 = nullptr;  // [batch, n], or
  float* out_f32 = nullptr;           // [batch, n] (exactly one of the two)
  int n = 0;
  int k = 0;                          // multiple of 32
  int batch = 0;                      // 1..kW4MaxBatch
  float softcap = 0.0f;               // > 0: out = cap * tanh(out / cap) (fp32 out only)
  int variant = -1;                   // tiling, 0..NumGemvW4Variants()-1; -1 = the batch's default
  bool paired = false;                // w is a paired tiling (n a multiple of 16)
  // paired only: out_bf16 is [batch, n / 2], gelu_tanh(first half's row r) *
  // second half's row r, from the fp32 sums (no rounding in between).
  bool gelu_gate = false;
  // Batch 1, fp32 output, unpaired, no softcap: out_f32 receives
  // GemvW4VariantSplits(variant) partial sums, [splits][n], whose sum is the
  // output (the consumer adds them, in order); the split tilings need this.
  bool partial_sums = false;
};

int NumGemvW4Variants();
const char* GemvW4VariantName(int variant);
// How many partial sums a tiling writes (1: the output itself).
int GemvW4VariantSplits(int variant);
// Whether a tiling serves `batch` rows (each covers 8, 16, 32 or 64 rows at
// most, and a batch runs only on the narrowest width that holds it); the
// split tilings only where the caller takes partial sums.
bool GemvW4VariantFits(int variant, int batch, bool partial_sums = false);
std::string LaunchGemvW4(const GemvW4Params& p, cudaStream_t stream);

}  // namespace gemma::kernels
