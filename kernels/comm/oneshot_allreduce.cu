#include "kernels/comm/oneshot_allreduce.h"

#include <algorithm>

#include "kernels/common/bf16_vec.cuh"

namespace gemma::kernels {
namespace {

constexpr int kThreads = 256;
// A rank that waits longer than this for its peers traps (a peer that never
// arrives, e.g. ranks issuing different calls), instead of hanging the GPU.
constexpr uint64_t kTimeoutNs = 300ull * 1000 * 1000 * 1000;

// Signal block layout (uint32 words): [phase 2][block][source rank] flags,
// then one epoch counter per block.
constexpr int kFlagWords = 2 * kOneShotMaxBlocks * kAllReduceMaxRanks;
__device__ __host__ constexpr int Flag(int phase, int block, int source) {
  return (phase * kOneShotMaxBlocks + block) * kAllReduceMaxRanks + source;
}

__device__ __forceinline__ void StoreRelease(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t LoadAcquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t GlobalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Thread s < num_ranks tells rank s that this block reached `phase` of
// `epoch`, then waits until rank s's block says the same here.
__device__ void Barrier(const OneShotAllReduceParams& p, int phase, uint32_t epoch) {
  const int s = threadIdx.x;
  if (s < p.num_ranks) {
    StoreRelease(p.signals[s] + Flag(phase, blockIdx.x, p.rank), epoch);
    const uint32_t* mine = p.signals[p.rank] + Flag(phase, blockIdx.x, s);
    const uint64_t start = GlobalTimer();
    while (LoadAcquire(mine) != epoch) {
      if (GlobalTimer() - start > kTimeoutNs) __trap();
    }
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads) OneShotAllReduceKernel(OneShotAllReduceParams p) {
  __shared__ uint32_t epoch;
  if (threadIdx.x == 0) epoch = ++p.signals[p.rank][kFlagWords + blockIdx.x];
  // Block b of every rank owns the same run of 8-element vectors.
  const int64_t vecs = p.count / 8;
  const int64_t per_block = (vecs + gridDim.x - 1) / gridDim.x;
  const int64_t begin = blockIdx.x * per_block;
  const int64_t end = min(vecs, begin + per_block);
  const uint4* in = reinterpret_cast<const uint4*>(p.in);
  uint4* mine = reinterpret_cast<uint4*>(p.staging[p.rank]);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) mine[i] = in[i];
  __threadfence_system();  // each thread's staging writes before any flag
  __syncthreads();
  Barrier(p, 0, epoch);
  uint4* out = reinterpret_cast<uint4*>(p.out);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float acc[8] = {};
    for (int r = 0; r < p.num_ranks; ++r) {
      // .cv: fetch again, never a line an earlier call left in this SM's L1.
      float part[8];
      Unpack8(__ldcv(reinterpret_cast<const uint4*>(p.staging[r]) + i), part);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += part[j];
    }
    out[i] = Pack8(acc);
  }
  __syncthreads();
  Barrier(p, 1, epoch);
}

}  // namespace

size_t OneShotSignalBytes() { return (kFlagWords + kOneShotMaxBlocks) * sizeof(uint32_t); }

std::string LaunchOneShotAllReduce(const OneShotAllReduceParams& p, cudaStream_t stream) {
  if (p.num_ranks < 1 || p.num_ranks > kAllReduceMaxRanks)
    return "one-shot all-reduce: num_ranks " + std::to_string(p.num_ranks) + " outside [1, 8]";
  if (p.rank < 0 || p.rank >= p.num_ranks) return "one-shot all-reduce: rank " + std::to_string(p.rank) + " out of range";
  if (p.count <= 0 || p.count % 8 != 0 || p.count > p.capacity)
    return "one-shot all-reduce: count " + std::to_string(p.count) + " must be a positive multiple of 8 up to " +
           std::to_string(p.capacity);
  if (p.in == nullptr || p.out == nullptr) return "one-shot all-reduce: null input or output";
  for (int r = 0; r < p.num_ranks; ++r)
    if (p.staging[r] == nullptr || p.signals[r] == nullptr)
      return "one-shot all-reduce: rank " + std::to_string(r) + " has no staging buffer or signals";
  const int64_t vecs = p.count / 8;
  const int blocks = static_cast<int>(std::min<int64_t>(kOneShotMaxBlocks, (vecs + kThreads - 1) / kThreads));
  OneShotAllReduceKernel<<<blocks, kThreads, 0, stream>>>(p);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? "" : std::string("one-shot all-reduce launch: ") + cudaGetErrorString(err);
}

}  // namespace gemma::kernels
