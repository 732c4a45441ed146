#include "kernels/quant/fp8_quant.h"

#include <cuda_fp8.h>

#include <cmath>
#include <cstring>

#include "kernels/common/launch.h"
#include "kernels/common/pdl.cuh"
#include "kernels/quant/fp8_row.cuh"

namespace gemma::kernels {
namespace {

constexpr int kQuantThreads = 256;

// Launched with programmatic serialization: once its input is ready it lets
// the fp8 GEMV after it launch (and prefetch weights).
__global__ void __launch_bounds__(kQuantThreads) QuantizeRowsKernel(const __grid_constant__ QuantizeRowsFp8Params p) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const uint4* x = reinterpret_cast<const uint4*>(p.x + row * p.cols);
  const int vecs = p.cols / 8;
  WaitForPreviousKernel();
  AllowDependentLaunch();
  float amax = 0.0f;
  for (int i = threadIdx.x; i < vecs; i += kQuantThreads) amax = fmaxf(amax, AbsMax8(x[i]));
  const float scale = Fp8RowScale(BlockMax(amax, scratch));
  const float inv = 1.0f / scale;
  if (threadIdx.x == 0) p.scale[row] = scale;
  uint2* out = reinterpret_cast<uint2*>(p.out + row * p.cols);
  for (int i = threadIdx.x; i < vecs; i += kQuantThreads) out[i] = QuantizeE4M3x8(x[i], inv);
}

__global__ void ScaleGemmKernel(const __grid_constant__ ScaleFp8GemmParams p) {
  const int64_t count = static_cast<int64_t>(p.m) * p.n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / p.n;
    const int col = static_cast<int>(i - row * p.n);
    const float s = p.weight_scale[col] * p.token_scale[row];
    if (p.out_f32) {
      const float v = p.out_f32[i] * s;
      p.out_f32[i] = p.softcap > 0.0f ? p.softcap * tanhf(v / p.softcap) : v;
    } else {
      p.out_bf16[i] = __float2bfloat16(__bfloat162float(p.out_bf16[i]) * s);
    }
  }
}

}  // namespace

std::string LaunchQuantizeRowsFp8(const QuantizeRowsFp8Params& p, cudaStream_t stream) {
  if (!p.x || !p.out || !p.scale) return "quantize_rows_fp8: null pointer";
  if (p.rows <= 0 || p.rows > 0x7fffffff || p.cols <= 0 || p.cols % 8 != 0) {
    return "quantize_rows_fp8: need rows >= 1 and cols a positive multiple of 8";
  }
  LaunchWithPdl(QuantizeRowsKernel, dim3(static_cast<unsigned>(p.rows)), dim3(kQuantThreads), 0, stream, p);
  return LaunchError("quantize_rows_fp8");
}

std::string LaunchScaleFp8Gemm(const ScaleFp8GemmParams& p, cudaStream_t stream) {
  if ((p.out_bf16 == nullptr) == (p.out_f32 == nullptr)) return "scale_fp8_gemm: need exactly one output";
  if (!p.weight_scale || !p.token_scale) return "scale_fp8_gemm: null scale";
  if (p.m <= 0 || p.n <= 0) return "scale_fp8_gemm: empty output";
  if (p.softcap > 0.0f && !p.out_f32) return "scale_fp8_gemm: softcap needs fp32 output";
  const int64_t count = static_cast<int64_t>(p.m) * p.n;
  const int64_t blocks = std::min<int64_t>((count + 255) / 256, 8192);
  ScaleGemmKernel<<<static_cast<int>(blocks), 256, 0, stream>>>(p);
  return LaunchError("scale_fp8_gemm");
}

uint8_t FloatToFp8E4M3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

float Fp8E4M3ToFloat(uint8_t bits) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(bits), __NV_E4M3);
  return __half2float(__half(h));
}

}  // namespace gemma::kernels
