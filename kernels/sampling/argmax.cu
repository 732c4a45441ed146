#include "kernels/sampling/argmax.h"

#include <algorithm>
#include <cfloat>
#include <climits>

#include "kernels/common/launch.h"

namespace gemma::kernels {
namespace {

constexpr int kThreads = 256;
// Chunks are at least this long: shorter ones would spend more on the
// reduction than they save.
constexpr int kMinChunk = 4096;

struct Best {
  float v;
  int i;
};

// A row's workspace: its chunks' bests and their arrival count. Rows keep
// their place whatever num_rows a launch has, so launches of different row
// counts (the decode graphs of each batch size) share one workspace.
struct RowSpace {
  Best best[kArgmaxMaxChunks];
  unsigned arrivals;
  unsigned pad;
};

// (value, index) order: larger value wins, then smaller index. NaN loses.
__device__ __forceinline__ bool Better(float v, int i, float bv, int bi) {
  if (v != v) return false;
  if (bv != bv) return true;
  return v > bv || (v == bv && i < bi);
}

__device__ __forceinline__ void Take(Best& b, float v, int i) {
  if (Better(v, i, b.v, b.i)) b = {v, i};
}

// The block's best over its threads' candidates; valid in thread 0.
__device__ Best BlockBest(Best b) {
  __shared__ Best warp_best[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) Take(b, __shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_best[warp] = b;
  __syncthreads();
  if (warp == 0) {
    b = lane < kThreads / 32 ? warp_best[lane] : Best{-FLT_MAX, INT_MAX};
    for (int o = 16; o > 0; o >>= 1)
      Take(b, __shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o));
  }
  return b;
}

// Grid (chunks, rows); workspace: a RowSpace per row.
__global__ void __launch_bounds__(kThreads) ArgmaxKernel(const __grid_constant__ ArgmaxParams p, int chunk) {
  const int row = blockIdx.y, chunks = gridDim.x;
  const float* logits = p.logits + static_cast<size_t>(row) * p.vocab;
  const int lo = blockIdx.x * chunk, hi = min(p.vocab, lo + chunk);
  Best b{-FLT_MAX, INT_MAX};  // any real index beats the sentinel on ties
  if ((p.vocab & 3) == 0) {   // rows 16-byte aligned; lo and hi multiples of 4
    for (int i = lo + threadIdx.x * 4; i < hi; i += kThreads * 4) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(logits + i));
      Take(b, v.x, i), Take(b, v.y, i + 1), Take(b, v.z, i + 2), Take(b, v.w, i + 3);
    }
  } else {
    for (int i = lo + threadIdx.x; i < hi; i += kThreads) Take(b, __ldg(logits + i), i);
  }
  b = BlockBest(b);
  if (chunks == 1) {
    if (threadIdx.x == 0) p.out[row] = b.i < p.vocab ? b.i : 0;
    return;
  }
  RowSpace& space = static_cast<RowSpace*>(p.workspace)[row];
  Best* partial = space.best;
  __shared__ bool last;
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = b;
    __threadfence();  // the partial is visible before the count says so
    last = atomicAdd(&space.arrivals, 1u) == static_cast<unsigned>(chunks - 1);
  }
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;
  __threadfence();  // read the other blocks' partials after their counts
  b = Best{-FLT_MAX, INT_MAX};
  for (int c = threadIdx.x; c < chunks; c += 32) {
    Take(b, __ldcg(&partial[c].v), __ldcg(&partial[c].i));  // L2: written by other blocks
  }
  for (int o = 16; o > 0; o >>= 1) Take(b, __shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o));
  if (threadIdx.x == 0) {
    p.out[row] = b.i < p.vocab ? b.i : 0;
    space.arrivals = 0;  // ready for the next launch (and graph replay)
  }
}

}  // namespace

size_t ArgmaxWorkspaceBytes(int max_rows) {
  return static_cast<size_t>(std::max(0, max_rows)) * sizeof(RowSpace);
}

std::string LaunchArgmax(const ArgmaxParams& p, cudaStream_t stream) {
  if (!p.logits || !p.out) return "argmax: null pointer";
  if (p.num_rows <= 0 || p.vocab <= 0) return "argmax: bad shape";
  int chunks = 1;
  if (p.workspace != nullptr) chunks = std::clamp(p.vocab / kMinChunk, 1, kArgmaxMaxChunks);
  // Multiples of 4 keep the vectorized loads of every chunk aligned.
  const int chunk = ((p.vocab + chunks - 1) / chunks + 3) / 4 * 4;
  chunks = (p.vocab + chunk - 1) / chunk;
  ArgmaxKernel<<<dim3(chunks, p.num_rows), kThreads, 0, stream>>>(p, chunk);
  return LaunchError("argmax");
}

}  // namespace gemma::kernels
