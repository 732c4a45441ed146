#include "kernels/sampling/argmax.h"

#include <cfloat>

#include "kernels/common/launch.h"

namespace gemma::kernels {
namespace {

constexpr int kThreads = 1024;

// (value, index) order: larger value wins, then smaller index. NaN loses.
__device__ __forceinline__ bool Better(float v, int i, float bv, int bi) {
  if (v != v) return false;
  if (bv != bv) return true;
  return v > bv || (v == bv && i < bi);
}

__global__ void __launch_bounds__(kThreads) ArgmaxKernel(const __grid_constant__ ArgmaxParams p) {
  __shared__ float vals[32];
  __shared__ int idxs[32];
  const float* row = p.logits + static_cast<size_t>(blockIdx.x) * p.vocab;
  float best = -FLT_MAX;
  int best_i = p.vocab;  // sentinel: any real index beats it on ties
  for (int i = threadIdx.x; i < p.vocab; i += blockDim.x) {
    const float v = row[i];
    if (Better(v, i, best, best_i)) {
      best = v;
      best_i = i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (Better(ov, oi, best, best_i)) {
      best = ov;
      best_i = oi;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    vals[warp] = best;
    idxs[warp] = best_i;
  }
  __syncthreads();
  if (warp == 0) {
    const int num_warps = blockDim.x >> 5;
    best = lane < num_warps ? vals[lane] : -FLT_MAX;
    best_i = lane < num_warps ? idxs[lane] : p.vocab;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
      if (Better(ov, oi, best, best_i)) {
        best = ov;
        best_i = oi;
      }
    }
    if (lane == 0) p.out[blockIdx.x] = best_i < p.vocab ? best_i : 0;
  }
}

}  // namespace

std::string LaunchArgmax(const ArgmaxParams& p, cudaStream_t stream) {
  if (!p.logits || !p.out) return "argmax: null pointer";
  if (p.num_rows <= 0 || p.vocab <= 0) return "argmax: bad shape";
  ArgmaxKernel<<<p.num_rows, kThreads, 0, stream>>>(p);
  return LaunchError("argmax");
}

}  // namespace gemma::kernels
