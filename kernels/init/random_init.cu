#include "kernels/init/random_init.h"

#include "kernels/common/launch.h"

namespace gemma::kernels {
namespace {

// splitmix64 finalizer: a cheap, well-mixed hash of (seed, index).
__host__ __device__ inline uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__host__ __device__ inline float Value(uint64_t seed, int64_t index, float mean, float stddev) {
  const uint64_t h = Mix(seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(index));
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // [0, 1)
  // Explicit fmaf on both sides: host and device then round identically
  // (nvcc would otherwise contract a*b+c differently from the host compiler).
  return fmaf(stddev * 1.7320508f, fmaf(2.0f, u, -1.0f), mean);
}

__global__ void RandomFillKernel(const __grid_constant__ RandomFillParams p) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = Value(p.seed, i, p.mean, p.stddev);
    if (p.out_f32) {
      p.out_f32[i] = v;
    } else {
      p.out_bf16[i] = __float2bfloat16(v);
    }
  }
}

}  // namespace

float RandomFillValue(uint64_t seed, int64_t index, float mean, float stddev) {
  return Value(seed, index, mean, stddev);
}

std::string LaunchRandomFill(const RandomFillParams& p, cudaStream_t stream) {
  if ((p.out_bf16 == nullptr) == (p.out_f32 == nullptr)) return "random_fill: need exactly one output";
  if (p.count <= 0) return "random_fill: empty tensor";
  int64_t blocks = (p.count + 255) / 256;
  if (blocks > 8192) blocks = 8192;
  RandomFillKernel<<<static_cast<int>(blocks), 256, 0, stream>>>(p);
  return LaunchError("random_fill");
}

}  // namespace gemma::kernels
