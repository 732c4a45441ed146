// A weight matrix on the device in nn.Linear layout [n, k], bf16 or FP8 E4M3
// with one fp32 scale per output row (value = fp8 * row_scale[row]). The
// forward passes these to LinearDispatcher, which picks the kernels by dtype, so
// nothing else needs to know how a layer's weights are stored.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace gemma::kernels {
struct WgmmaFp8Weights;  // kernels/gemv/wgmma_fp8.h
}  // namespace gemma::kernels

namespace gemma::cuda {

struct DeviceMatrix {
  const void* data = nullptr;
  const float* row_scale = nullptr;  // fp8 only: [n]
  // fp8 only, optional: the matrix's TMA descriptor for the wgmma FP8 linear
  // (built at load time, owned by DeviceWeights); null: cuBLASLt only.
  const kernels::WgmmaFp8Weights* wgmma = nullptr;

  DeviceMatrix() = default;
  // Implicit: a bare bf16 pointer is a bf16 matrix (the embedding/LM head).
  DeviceMatrix(const __nv_bfloat16* bf16) : data(bf16) {}  // NOLINT(google-explicit-constructor)
  DeviceMatrix(const uint8_t* fp8, const float* scale, const kernels::WgmmaFp8Weights* map = nullptr)
      : data(fp8), row_scale(scale), wgmma(map) {}

  // int4 only (W4A16): the codes' fp16 scales in the tiled layout of
  // kernels/gemv/gemv_w4a16.h (data: the tiled codes), and the group size
  // (32: the layout's).
  const __half* w4_scales = nullptr;
  int w4_group = 0;
  // int4 only: the codes are in the paired tiling (a fused gate|up matrix,
  // kernels/quant/w4_layout.h), which lets the W4A16 kernel write the gelu
  // gate's output itself (LinearArgs::gelu_gate).
  bool w4_paired = false;
  // int4 only, optional: the same values dequantized to bf16 ((u - 8) d
  // rounded once) at load time, which passes of more rows than the W4A16
  // kernel serves well read with the bf16 GEMM (GEMMA_INT4_BF16_COPY).
  const __nv_bfloat16* w4_bf16 = nullptr;
  // int4 only, optional, instead of w4_bf16: the dequantized values as E4M3
  // with per-row scales (GEMMA_INT4_FP8_COPY), for the fp8 path.
  const uint8_t* w4_fp8 = nullptr;
  const float* w4_fp8_scale = nullptr;
  const kernels::WgmmaFp8Weights* w4_fp8_wgmma = nullptr;
  static DeviceMatrix Int4(const uint8_t* packed, const __half* scales, int group) {
    DeviceMatrix m;
    m.data = packed;
    m.w4_scales = scales;
    m.w4_group = group;
    return m;
  }

  // int4 with an fp8 copy: that copy as an fp8 matrix.
  DeviceMatrix Fp8Copy() const { return DeviceMatrix(w4_fp8, w4_fp8_scale, w4_fp8_wgmma); }

  bool fp8() const { return row_scale != nullptr; }
  bool int4() const { return w4_scales != nullptr; }
  const __nv_bfloat16* bf16() const { return static_cast<const __nv_bfloat16*>(data); }
  const uint8_t* e4m3() const { return static_cast<const uint8_t*>(data); }
};

}  // namespace gemma::cuda
