#include "kernels/quant/w4_quant.h"

#include "kernels/common/launch.h"
#include "kernels/quant/w4_layout.h"

namespace gemma::kernels {
namespace {

// Nibble of element e (0..7) inside its layout word, and a group's word offset.
__device__ __forceinline__ int NibbleOf(int e) { return (e % 2 == 0) ? e / 2 : 4 + e / 2; }
__device__ __forceinline__ int64_t WordOffset(int64_t g, int t) { return (g / 4) * 64 + t * 16 + (g % 4) * 4; }

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float ToFloat(float v) { return v; }

// One thread per (row, 32-block); padding blocks (k <= column < kpad) get
// code 8 and scale 0.
template <typename T>
__global__ void QuantizeQ4_0Kernel(const T* __restrict__ in, uint8_t* __restrict__ w, __half* __restrict__ scales,
                                   int64_t n, int k) {
  const int kpad = W4PaddedK(k);
  const int blocks_per_row = kpad / 32;
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= n * blocks_per_row) return;
  const int64_t row = id / blocks_per_row;
  const int g = static_cast<int>(id % blocks_per_row);
  uint8_t* out = w + row * (kpad / 2);
  if (32 * g >= k) {
    for (int t = 0; t < 4; ++t) *reinterpret_cast<uint32_t*>(out + WordOffset(g, t)) = 0x88888888u;
    scales[row * blocks_per_row + g] = __float2half_rn(0.0f);
    return;
  }
  const T* x = in + row * k + 32 * g;
  float v[32];
  float amax = 0.0f, max = 0.0f;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    v[j] = ToFloat(x[j]);
    if (amax < fabsf(v[j])) {
      amax = fabsf(v[j]);
      max = v[j];
    }
  }
  const float d = __fdiv_rn(max, -8.0f);
  const float id_ = d != 0.0f ? __frcp_rn(d) : 0.0f;
  scales[row * blocks_per_row + g] = __float2half_rn(d);
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    uint32_t word = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float shifted = __fadd_rn(__fmul_rn(v[8 * t + e], id_), 8.5f);
      const int q = min(15, static_cast<int>(shifted));
      word |= static_cast<uint32_t>(q) << (4 * NibbleOf(e));
    }
    *reinterpret_cast<uint32_t*>(out + WordOffset(g, t)) = word;
  }
}

// Tiled layout (gemv_w4a16.h): byte offset of row `row`'s lane-chunk t of
// super-chunk sc, and the fp16 index of its scale of group 4 sc + w.
__device__ __forceinline__ int64_t TiledChunk(int64_t row, int sc, int t, int supers) {
  return ((row / 16) * supers + sc) * 1024 + (row % 16 / 8) * 512 + (4 * (row % 8) + t) * 16;
}
__device__ __forceinline__ int64_t TiledScale(int64_t row, int sc, int w, int supers) {
  return ((row / 16) * supers + sc) * 64 + (row % 8) * 8 + (row % 16 / 8) * 4 + w;
}

// One thread per (padded row, super-chunk, lane-chunk): 16 bytes of codes and
// the scale of the chunk's group t (rows past n: code 8, scale 0).
__global__ void TileW4Kernel(const uint8_t* __restrict__ row_w, const __half* __restrict__ row_scales, int group,
                             uint8_t* __restrict__ w, __half* __restrict__ scales, int64_t n, int k, bool paired) {
  const int kpad = W4PaddedK(k), supers = kpad / 128;
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t rows = (n + 15) / 16 * 16;
  if (id >= rows * supers * 4) return;
  const int t = static_cast<int>(id % 4);
  const int sc = static_cast<int>(id / 4 % supers);
  const int64_t row = id / 4 / supers;
  uint4 v = make_uint4(0x88888888u, 0x88888888u, 0x88888888u, 0x88888888u);
  __half s = __float2half_rn(0.0f);
  if (row < n) {
    const int64_t src = paired ? W4PairedRow(row, n) : row;
    v = *reinterpret_cast<const uint4*>(row_w + src * (kpad / 2) + sc * 64 + t * 16);
    s = row_scales[src * (kpad / group) + (128 * sc + 32 * t) / group];
  }
  *reinterpret_cast<uint4*>(w + TiledChunk(row, sc, t, supers)) = v;
  scales[TiledScale(row, sc, t, supers)] = s;  // thread t writes group 4 sc + t's scale
}

// One thread per (row, 32-group, word): 8 codes -> 8 bf16 (one 16-byte store).
__global__ void DequantizeW4Kernel(const uint8_t* __restrict__ w, const __half* __restrict__ scales,
                                   __nv_bfloat16* __restrict__ out, int64_t n, int k, bool paired) {
  const int supers = W4PaddedK(k) / 128;
  const int words_per_row = k / 8;
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= n * words_per_row) return;
  const int64_t row = id / words_per_row;
  const int col0 = static_cast<int>(id % words_per_row) * 8;
  const int sc = col0 / 128, q = col0 % 128 / 32, t = col0 % 32 / 8;
  const int64_t tiled = paired ? W4PairedTiledRow(row, n) : row;
  const uint32_t word = *reinterpret_cast<const uint32_t*>(w + TiledChunk(tiled, sc, t, supers) + 4 * q);
  const float s = __half2float(scales[TiledScale(tiled, sc, q, supers)]);
  __align__(16) __nv_bfloat16 vals[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int u = (word >> (4 * NibbleOf(e))) & 0xF;
    vals[e] = __float2bfloat16_rn(static_cast<float>(u - 8) * s);
  }
  *reinterpret_cast<uint4*>(out + row * k + col0) = *reinterpret_cast<const uint4*>(vals);
}

constexpr int kThreads = 256;

}  // namespace

std::string LaunchQuantizeQ4_0(const QuantizeQ4_0Params& p, cudaStream_t stream) {
  if ((p.in_bf16 == nullptr) == (p.in_f32 == nullptr)) return "quantize_q4_0: need exactly one input";
  if (!p.w || !p.scales) return "quantize_q4_0: null output";
  if (p.n <= 0 || p.k <= 0 || p.k % 32 != 0) return "quantize_q4_0: need n >= 1 and k a positive multiple of 32";
  const int64_t threads = p.n * (W4PaddedK(p.k) / 32);
  const dim3 grid(static_cast<unsigned>((threads + kThreads - 1) / kThreads));
  if (p.in_bf16) {
    QuantizeQ4_0Kernel<<<grid, kThreads, 0, stream>>>(p.in_bf16, p.w, p.scales, p.n, p.k);
  } else {
    QuantizeQ4_0Kernel<<<grid, kThreads, 0, stream>>>(p.in_f32, p.w, p.scales, p.n, p.k);
  }
  return LaunchError("quantize_q4_0");
}

std::string LaunchTileW4(const TileW4Params& p, cudaStream_t stream) {
  if (!p.row_w || !p.row_scales || !p.w || !p.scales) return "tile_w4: null pointer";
  if (p.n <= 0 || p.k <= 0 || p.k % 32 != 0) return "tile_w4: need n >= 1 and k a positive multiple of 32";
  if (p.group != 32 && p.group != 128) return "tile_w4: group must be 32 or 128";
  const int64_t threads = (p.n + 15) / 16 * 16 * (W4PaddedK(p.k) / 128) * 4;
  const dim3 grid(static_cast<unsigned>((threads + kThreads - 1) / kThreads));
  if (p.paired && p.n % 16 != 0) return "tile_w4: a paired tiling needs n a multiple of 16, got " + std::to_string(p.n);
  TileW4Kernel<<<grid, kThreads, 0, stream>>>(p.row_w, p.row_scales, p.group, p.w, p.scales, p.n, p.k, p.paired);
  return LaunchError("tile_w4");
}

std::string LaunchDequantizeW4(const DequantizeW4Params& p, cudaStream_t stream) {
  if (!p.w || !p.scales || !p.out) return "dequantize_w4: null pointer";
  if (p.n <= 0 || p.k <= 0 || p.k % 32 != 0) return "dequantize_w4: need n >= 1 and k a positive multiple of 32";
  const int64_t threads = p.n * (p.k / 8);
  const dim3 grid(static_cast<unsigned>((threads + kThreads - 1) / kThreads));
  if (p.paired && p.n % 16 != 0) return "dequantize_w4: a paired tiling needs n a multiple of 16, got " + std::to_string(p.n);
  DequantizeW4Kernel<<<grid, kThreads, 0, stream>>>(p.w, p.scales, p.out, p.n, p.k, p.paired);
  return LaunchError("dequantize_w4");
}

}  // namespace gemma::kernels
