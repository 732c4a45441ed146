// 4-bit weights (W4A16) on the host: GGML's Q4_0 numerics, compressed-tensors
// `pack-quantized` unpacking, and the packed layout the W4A16 kernels read
// (kernels/gemv/gemv_w4a16.h). Both formats are symmetric with one scale per
// group of input columns and dequantize as w = (u - 8) * scale, u in 0..15.
//
// Device layout of an [n, k] matrix, k padded to a multiple of 128 (kpad):
//   packed: n rows of kpad / 2 bytes. Each row is a run of 64-byte super-chunks
//     (128 k = four groups of 32). Super-chunk s holds four 16-byte lane-chunks;
//     lane-chunk t is four 32-bit words, word w = elements 8t..8t+7 of the
//     32-group 4s + w. Inside a word, nibble j (bits 4j..4j+3) holds element 2j
//     for j < 4 and element 2(j - 4) + 1 for j >= 4, so `(word >> 4p) & 0x000f000f`
//     puts elements 2p and 2p+1 in the two 16-bit halves.
//   scales: n rows of kpad / group fp16 values (group 32 or 128); padding
//     columns have code 8 (zero) and, where a whole group is padding, scale 0.
// The four lanes of a GEMV quad read the four lane-chunks of one super-chunk,
// so every MMA sums products of a single 32-group (one scale per row).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace gemma::quant {

inline constexpr int kQ4BlockSize = 32;   // Q4_0's block along the input dimension
inline constexpr int kW4SuperK = 128;     // device layout unit (four 32-blocks)

// An int4 matrix in plain row-major form: codes u = q + 8 in 0..15 and one
// fp16 scale per (row, group).
struct Int4Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  int group = kQ4BlockSize;
  std::vector<uint8_t> codes;    // [rows, cols]
  std::vector<uint16_t> scales;  // [rows, ceil(cols / group)] fp16 bits

  int64_t groups_per_row() const { return (cols + group - 1) / group; }
  // The dequantized value (u - 8) * scale, exact in double.
  double Value(int64_t r, int64_t c) const;
};

uint16_t FloatToHalf(float value);  // round to nearest even, saturating to ±inf like a cast

// GGML's Q4_0 rule for one block of 32: d = m / -8 where m is the value of
// largest magnitude (its sign kept), q = min(15, trunc(x / d * ... + 8.5)) with
// x multiplied by 1 / d in fp32, d stored as fp16. A block of zeros gets d = 0.
void QuantizeQ4_0Block(const float* x, uint8_t* codes, uint16_t* scale);

// Q4_0 of a [rows, cols] float matrix (cols a multiple of 32).
absl::StatusOr<Int4Matrix> QuantizeQ4_0(std::span<const float> w, int64_t rows, int64_t cols);

// Snaps values onto the Q4_0 grid: quantize, then dequantize in fp32 (exact:
// 4-bit integers times fp16 scales). Quantizing the result again returns the
// same codes and scales.
std::vector<float> SnapToQ4_0Grid(std::span<const float> w, int64_t rows, int64_t cols);

// Snaps onto a Q4_0 grid whose values are also bf16 values (for fixtures that
// travel through a bf16 load): per block, d = m / -8 rounded to 5 significant
// bits (so every (u - 8) d fits bf16's 8), codes round(x / d) + 8 clamped to
// 0..15 (the largest-magnitude value lands on -8 d). GGML's rule recovers d
// and the codes exactly from the result, in fp32 or after a cast to bf16.
std::vector<float> SnapToQ4_0GridBf16(std::span<const float> w, int64_t rows, int64_t cols);

// compressed-tensors pack-quantized, symmetric int4: `weight_packed` int32
// [rows, ceil(cols / 8)], element c of a row at bits 4 (c % 8) of word c / 8,
// stored as q + 8; `weight_scale` [rows, ceil(cols / group)] given here as
// float (the checkpoint's bf16/fp16/fp32 converted). The codes and scales are
// kept as they are, so every scale must be an fp16 value (CheckFp16Scales):
// the int4 kernels read fp16 scales, and a rounded one would change weights.
absl::StatusOr<Int4Matrix> UnpackPackQuantized(std::span<const int32_t> packed, std::span<const float> scales,
                                               int64_t rows, int64_t cols, int group);

// OK when every scale is finite and exactly an fp16 value (signs included:
// the format's dequantization is q * scale, whatever the sign); otherwise the
// first offender's [row, group] and value. bf16 scales in fp16's normal range
// (6.1e-5 .. 65504) always are.
absl::Status CheckFp16Scales(std::span<const float> scales, int64_t groups_per_row);

// The same weights as Q4_0 blocks (group 32): a group of 128 becomes four
// blocks with its scale. Exact: codes and scales are copied.
Int4Matrix ToQ4_0Blocks(Int4Matrix m);

// The inverse (used to write fixtures in the published layout).
std::vector<int32_t> PackQuantizedWords(const Int4Matrix& m);

// The device layout described above.
struct W4DeviceMatrix {
  int64_t rows = 0;
  int64_t cols = 0;      // k
  int64_t kpad = 0;      // k rounded up to kW4SuperK
  int group = kQ4BlockSize;
  std::vector<uint8_t> packed;   // [rows, kpad / 2]
  std::vector<uint16_t> scales;  // [rows, kpad / group] fp16 bits
};
W4DeviceMatrix PackForDevice(const Int4Matrix& m);

// A pack-quantized matrix (as UnpackPackQuantized takes it, the words as
// little-endian bytes at any alignment) straight into the device layout with
// group-32 scales: the result of PackForDevice(ToQ4_0Blocks(
// UnpackPackQuantized(...))) without the byte-per-code form, since each
// packed word holds the 8 codes of one device word in another nibble order.
// Rows are split over `threads` threads (0: one per hardware thread).
absl::StatusOr<W4DeviceMatrix> PackQuantizedForDevice(std::span<const uint8_t> packed_words,
                                                      std::span<const float> scales, int64_t rows, int64_t cols,
                                                      int group, int threads = 0);

// Byte offset of (group g's word t) inside a packed device row, and the nibble
// that holds element e (0..7) of that word: the layout's two rules, shared
// with the device quantizer's tests.
inline int64_t W4WordOffset(int64_t g, int t) { return (g / 4) * 64 + t * 16 + (g % 4) * 4; }
inline int W4NibbleOf(int e) { return (e % 2 == 0) ? e / 2 : 4 + e / 2; }

}  // namespace gemma::quant
