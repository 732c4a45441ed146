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

// Uniform in (0, 1): 24 random bits, centred in their cell so 0 and 1 never occur.
GEMMA_HOST_DEVICE float SampleUniform(uint64_t seed, uint64_t step, uint32_t token) {
  const uint64_t h = Mix64(Mix64(seed ^ 0x9e3779b97f4a7c15ULL) + step * 0xd1b54a32d192ed03ULL + token);
  return (static_cast<float>(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

}  // namespace gemma::kernels
