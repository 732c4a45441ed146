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
// Tiled layout of an [n, k] matrix: rows in tiles of 16 (n padded), k padded
// to kpad = W4PaddedK(k), S = kpad / 128 super-chunks per row.
//   codes:  tiles x S blocks of 1024 bytes; block (T, s) holds, at byte
//           512 h + 16 lane (lane = 4 g + t), the row layout's lane-chunk t of
//           super-chunk s of row 16 T + 8 h + g (four words; word w = elements
//           8t..8t+7 of the 32-group 4s + w, nibbles ordered so that
//           `(word >> 4p) & 0x000f000f | 0x43004300` is two codes as bf16 128 + u).
//   scales: tiles x S blocks of 64 fp16; block (T, s) holds at 8 g + 4 h + w
//           the scale of row 16 T + 8 h + g, group 4s + w.
//   Padding rows and columns have code 8 and scale 0.
// So one warp load of 16 bytes per lane is 512 contiguous bytes, holding the
// A fragments of a 16-row x 128-k mma.sync m16n8k16 tile, and the 128-byte
// scale block of the same tile is one more load.
// Paired tiling (a fused gate|up matrix, n a multiple of 16): tile T holds
// rows 8T..8T+7 of the first half in its rows 0..7 and the same rows of the
// second half in rows 8..15 (W4PairedRow), so the lane that accumulates a
// gate row also holds its up row: the kernel can write gelu_tanh(gate) * up
// directly. The other paired consumers (the dequantizer) map rows back.
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

namespace gemma::kernels {

inline constexpr int kW4MaxBatch = 64;

#ifdef __CUDACC__
#define GEMMA_W4_HD __host__ __device__
#else
#define GEMMA_W4_HD
#endif
// k rounded up to the layout's 128-column super-chunks.
GEMMA_W4_HD inline int W4PaddedK(int k) { return (k + 127) / 128 * 128; }
// The matrix row held at tiled row `tiled` of a paired tiling of n rows.
GEMMA_W4_HD inline int64_t W4PairedRow(int64_t tiled, int64_t n) {
  return (tiled >> 3 & 1) * (n / 2) + (tiled >> 4) * 8 + (tiled & 7);
}
// The tiled row of matrix row `row` in a paired tiling of n rows.
GEMMA_W4_HD inline int64_t W4PairedTiledRow(int64_t row, int64_t n) {
  const int64_t half = row >= n / 2 ? 1 : 0, r = row - half * (n / 2);
  return (r >> 3) * 16 + half * 8 + (r & 7);
}
// Bytes of the tiled codes and scales of an [n, k] matrix.
GEMMA_W4_HD inline int64_t W4TiledCodeBytes(int64_t n, int k) { return (n + 15) / 16 * (W4PaddedK(k) / 128) * 1024; }
GEMMA_W4_HD inline int64_t W4TiledScaleBytes(int64_t n, int k) { return (n + 15) / 16 * (W4PaddedK(k) / 128) * 128; }
#undef GEMMA_W4_HD

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
};

int NumGemvW4Variants();
const char* GemvW4VariantName(int variant);
// Whether a tiling serves `batch` rows (each covers 8, 16, 32 or 64 rows at
// most, and a batch runs only on the narrowest width that holds it).
bool GemvW4VariantFits(int variant, int batch);
std::string LaunchGemvW4(const GemvW4Params& p, cudaStream_t stream);

}  // namespace gemma::kernels
