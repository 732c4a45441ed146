// FP8 E4M3 helpers for the fp8 weight path: per-row quantization of
// bf16 matrices (weights at load time, activations per token on the fly) and
// the epilogue that applies per-row x per-column scales to a GEMM result.
//
// Scales are fp32 with value = fp8 * scale; a row's scale is amax / 448 (the
// E4M3 maximum), 1 for an all-zero row. Conversion saturates to +-448.
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace gemma::kernels {

constexpr float kFp8E4M3Max = 448.0f;

struct QuantizeRowsFp8Params {
  const __nv_bfloat16* x = nullptr;  // [rows, cols]
  uint8_t* out = nullptr;            // [rows, cols] E4M3 bits
  float* scale = nullptr;            // [rows]
  int64_t rows = 0;
  int cols = 0;                      // multiple of 8
};

// One block per row. Launched with programmatic stream serialization: it waits
// for the previous kernel before reading x, then calls
// griddepcontrol.launch_dependents (the fp8 GEMV that follows may prefetch its
// weights meanwhile). The residual norm and the gelu gate can emit the same rows
// themselves (their out_fp8), which saves this launch.
std::string LaunchQuantizeRowsFp8(const QuantizeRowsFp8Params& p, cudaStream_t stream);

// out[m, n] = cap? (out[m, n] * col_scale[n] * row_scale[m]): the scales of
// an fp8 GEMM (n = weight rows, m = tokens), in place on its output.
struct ScaleFp8GemmParams {
  __nv_bfloat16* out_bf16 = nullptr;  // [m, n], or
  float* out_f32 = nullptr;           // [m, n] (exactly one)
  const float* weight_scale = nullptr;  // [n]
  const float* token_scale = nullptr;   // [m]
  int m = 0, n = 0;
  float softcap = 0.0f;               // > 0: cap * tanh(v / cap) (fp32 out only)
};

std::string LaunchScaleFp8Gemm(const ScaleFp8GemmParams& p, cudaStream_t stream);

// Host twins for tests and the host-side quantizer: E4M3 (round to nearest
// even, saturating) bits of v, and the value of E4M3 bits.
uint8_t FloatToFp8E4M3(float v);
float Fp8E4M3ToFloat(uint8_t bits);

}  // namespace gemma::kernels
