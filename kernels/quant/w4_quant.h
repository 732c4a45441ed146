// 4-bit weights on the device. Two layouts: the row layout of
// engine/model/quantization_int4.h (what a loader produces: PackForDevice on
// the host) and the tiled layout the W4A16 kernels read (kernels/quant/w4_layout.h).
//   - LaunchQuantizeQ4_0: bf16 or fp32 [n, k] -> Q4_0 codes and fp16 scales in
//     the row layout, GGML's rule (d = m / -8 with m the block's value of
//     largest magnitude, u = min(15, trunc(x * (1 / d) + 8.5)), d stored as
//     fp16), the same bits as the host's QuantizeQ4_0 + PackForDevice (no
//     fused multiply-adds);
//   - LaunchTileW4: row layout (group 32 or 128) -> tiled layout (group 32; a
//     group-128 scale is repeated over its four groups). The one conversion
//     every int4 matrix goes through on its way to the kernels;
//   - LaunchDequantizeW4: tiled codes and scales -> bf16 [n, k] (round to
//     nearest of (u - 8) * scale), for passes of more rows than the W4A16
//     kernel takes, which multiply with a bf16 GEMM.
// Launchers validate, never allocate or synchronize, return "" or a message.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace gemma::kernels {

struct QuantizeQ4_0Params {
  const __nv_bfloat16* in_bf16 = nullptr;  // [n, k], or
  const float* in_f32 = nullptr;           // [n, k] (exactly one)
  uint8_t* w = nullptr;                    // [n, W4PaddedK(k) / 2]
  __half* scales = nullptr;                // [n, W4PaddedK(k) / 32]
  int64_t n = 0;
  int k = 0;                               // multiple of 32
};
std::string LaunchQuantizeQ4_0(const QuantizeQ4_0Params& p, cudaStream_t stream);

struct TileW4Params {
  const uint8_t* row_w = nullptr;       // [n, W4PaddedK(k) / 2] row layout
  const __half* row_scales = nullptr;   // [n, W4PaddedK(k) / group]
  int group = 32;                       // 32 or 128
  uint8_t* w = nullptr;                 // W4TiledCodeBytes(n, k)
  __half* scales = nullptr;             // W4TiledScaleBytes(n, k) / 2 values
  int64_t n = 0;
  int k = 0;                            // multiple of 32
  bool paired = false;                  // the paired tiling (gemv_w4a16.h; n a multiple of 16)
};
std::string LaunchTileW4(const TileW4Params& p, cudaStream_t stream);

struct DequantizeW4Params {
  const uint8_t* w = nullptr;      // tiled codes
  const __half* scales = nullptr;  // tiled scales
  __nv_bfloat16* out = nullptr;    // [n, k]
  int64_t n = 0;
  int k = 0;                       // multiple of 32
  bool paired = false;             // w is a paired tiling; out keeps the matrix's row order
};
std::string LaunchDequantizeW4(const DequantizeW4Params& p, cudaStream_t stream);

}  // namespace gemma::kernels
