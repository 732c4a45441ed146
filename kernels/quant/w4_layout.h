// The tiled device layout of 4-bit (Q4_0) weights that the W4A16 kernel
// (kernels/gemv/gemv_w4a16.h) reads and LaunchTileW4 (w4_quant.h) writes.
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
#pragma once

#include <cstdint>

namespace gemma::kernels {

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

}  // namespace gemma::kernels
