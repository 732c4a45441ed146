// read-bw-bench: the HBM read ceiling the decode GEMVs are measured against
// (the FP8 GEMVs aim at >= 85 % of it). Streams one large buffer (bigger than L2,
// as the weights of a decode step are) with 16-byte non-allocating loads in
// two access patterns:
//   linear  consecutive lanes read consecutive 16 B (512 B per warp load)
//   rows16  the fp8 GEMV's pattern: lane (g, t) reads chunk t of rows g and
//           g + 8 of a 16-row tile, so one warp load touches 16 rows x 64 B
// at several blocks per SM and loads in flight per lane, and prints TB/s.
//
//   read-bw-bench [GB]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "bench/kernels/mean_launch_ms.h"
#include "kernels/common/stream_load.cuh"

namespace {

using gemma::kernels::LoadStream;

__device__ unsigned int g_sink;

template <int U>
__global__ void LinearRead(const uint4* __restrict__ p, size_t n_vec) {
  uint32_t acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n_vec; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = LoadStream(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n_vec; i += stride) {
    const uint4 v = LoadStream(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) g_sink = acc;
}

// Rows of `row_vecs` 16-byte chunks; warp w of the grid owns 16-row tiles
// w, w + warps, ...; each step a lane loads U chunks of rows g and g + 8.
template <int U>
__global__ void Rows16Read(const uint4* __restrict__ p, int rows, int row_vecs) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int warps = gridDim.x * (blockDim.x >> 5);
  uint32_t acc = 0;
  for (int tile = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); tile * 16 < rows; tile += warps) {
    const uint4* r0 = p + size_t(tile * 16 + g) * row_vecs;
    const uint4* r1 = r0 + size_t(8) * row_vecs;
    for (int c = 0; c < row_vecs; c += 4 * U) {
      uint4 v[U][2];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int cc = c + 4 * u + t;
        v[u][0] = cc < row_vecs ? LoadStream(r0 + cc) : make_uint4(0, 0, 0, 0);
        v[u][1] = cc < row_vecs ? LoadStream(r1 + cc) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) acc ^= v[u][0].x ^ v[u][1].y ^ v[u][0].z ^ v[u][1].w;
    }
  }
  if (acc == 0x12345678u) g_sink = acc;
}

template <typename F>
double TimeMs(F launch) {
  return gemma::kernels::bench::MeanLaunchMs(launch, 1, 5);
}

}  // namespace

int main(int argc, char** argv) {
  const double gb = argc > 1 ? std::atof(argv[1]) : 4.0;
  const size_t bytes = size_t(gb * 1e9) / 4096 * 4096;
  void* buf = nullptr;
  if (cudaMalloc(&buf, bytes) != cudaSuccess) {
    std::printf("read-bw-bench: cannot allocate %.1f GB\n", gb);
    return 1;
  }
  cudaMemset(buf, 1, bytes);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const auto* p = static_cast<const uint4*>(buf);
  const size_t n_vec = bytes / 16;
  double best = 0;
  for (int per_sm : {1, 2, 4, 8}) {
    for (int threads : {256, 512}) {
      const int blocks = sms * per_sm;
      const double ms4 = TimeMs([&] { LinearRead<4><<<blocks, threads>>>(p, n_vec); });
      const double ms8 = TimeMs([&] { LinearRead<8><<<blocks, threads>>>(p, n_vec); });
      std::printf("read-bw linear blocks/SM %d threads %d: u4 %.2f TB/s, u8 %.2f TB/s\n", per_sm, threads,
                  bytes / ms4 / 1e9, bytes / ms8 / 1e9);
      best = std::max(best, bytes / std::min(ms4, ms8) / 1e9);
    }
  }
  // rows16 with the 31B row lengths in bytes (fp8 k = 5376, 8192, 21504).
  for (int row_bytes : {5376, 8192, 21504}) {
    const int row_vecs = row_bytes / 16;
    const int rows = int(bytes / row_bytes) / 16 * 16;
    for (int per_sm : {4, 8, 16}) {
      const int blocks = sms * per_sm;
      const double ms4 = TimeMs([&] { Rows16Read<4><<<blocks, 128>>>(p, rows, row_vecs); });
      const double ms8 = TimeMs([&] { Rows16Read<8><<<blocks, 128>>>(p, rows, row_vecs); });
      const double used = double(rows) * row_bytes;
      std::printf("read-bw rows16 row %5d B, 4-warp blocks/SM %2d: u4 %.2f TB/s, u8 %.2f TB/s\n", row_bytes,
                  per_sm, used / ms4 / 1e9, used / ms8 / 1e9);
    }
  }
  const cudaError_t err = cudaDeviceSynchronize();
  std::printf("read-bw best linear %.2f TB/s (%s)\n", best, cudaGetErrorString(err));
  cudaFree(buf);
  return err == cudaSuccess ? 0 : 1;
}
