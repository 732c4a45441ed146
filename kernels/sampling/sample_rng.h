// The counter-based random numbers of device sampling, shared by the kernel
// and host references: one uniform per (seed, step, token), so a draw does
// not depend on the batch, the launch shape or earlier draws (a preempted
// sequence resumed at step n draws what it would have drawn).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define GEMMA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GEMMA_HOST_DEVICE inline
#endif

namespace gemma::kernels {

// SplitMix64's finalizer: a bijective 64-bit mix.
GEMMA_HOST_DEVICE uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in (0, 1) from a hash: 23 random bits centred in their cell, so
// the extremes are 2^-24 and 1 - 2^-24, both exact in float (with 24 bits the
// top cell's centre would round to 1.0, and -log(-log(1)) is +inf).
GEMMA_HOST_DEVICE float UniformFromHash(uint64_t h) {
  return (static_cast<float>(h >> 41) + 0.5f) * (1.0f / 8388608.0f);
}

GEMMA_HOST_DEVICE float SampleUniform(uint64_t seed, uint64_t step, uint32_t token) {
  return UniformFromHash(Mix64(Mix64(seed ^ 0x9e3779b97f4a7c15ULL) + step * 0xd1b54a32d192ed03ULL + token));
}

// Temperatures below this sample as greedy: 1 / t would overflow the scaled
// logits (t = 1e-39 gives inf), and the draw is the argmax anyway.
constexpr float kMinSampleTemperature = 1e-5f;

// The one greedy rule, shared by the device kernel, its host twin, the host
// sampler and the engine's choice of forward: temperature 0, anything below
// kMinSampleTemperature, and NaN take the argmax.
GEMMA_HOST_DEVICE bool IsGreedyTemperature(float temperature) {
  return !(temperature >= kMinSampleTemperature);
}

}  // namespace gemma::kernels
