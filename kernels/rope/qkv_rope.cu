#include "kernels/rope/qkv_rope.h"

#include <cuda_fp8.h>

#include "kernels/common/bf16_vec.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/pdl.cuh"
#include "kernels/rope/norm_rope_head.cuh"

namespace gemma::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxHeadDim = 512;

enum class Part { kQuery, kKey, kValue };

// One warp normalizes (and for q/k rotates) one head vector of D values
// (NormRopeHead); dst: bf16, or E4M3 codes (unit scale, saturating) when fp8.
__device__ void NormRopeHeadTo(const __nv_bfloat16* src, void* dst, bool fp8, const float* weight, bool rotate,
                               const QkvRopeParams& p, float* buf, const float* cos_t, const float* sin_t) {
  NormRopeHead(src, p.head_dim, p.eps, weight, rotate, p.rope_pairs, cos_t, sin_t, buf, [&](int i, float out) {
    if (fp8) {
      static_cast<__nv_fp8_e4m3*>(dst)[i] = __nv_fp8_e4m3(out);
    } else {
      static_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16(out);
    }
  });
}

// Element `index` of a cache of bf16 or E4M3 elements.
__device__ __forceinline__ void* CacheAt(void* cache, bool fp8, size_t index) {
  return static_cast<uint8_t*>(cache) + index * (fp8 ? 1 : 2);
}

__global__ void __launch_bounds__(kWarps * 32) QkvRopeKernel(const __grid_constant__ QkvRopeParams p) {
  __shared__ float bufs[kWarps][kMaxHeadDim];
  __shared__ float cos_t[kMaxHeadDim / 2], sin_t[kMaxHeadDim / 2];
  const int t = blockIdx.x;
  const int warp = threadIdx.x >> 5;
  const int d = p.head_dim;
  const int kv_parts = p.k_eq_v ? 1 : 2;
  const int width = (p.num_heads + kv_parts * p.num_kv_heads) * d;
  const __nv_bfloat16* row = p.qkv + static_cast<size_t>(t) * width;
  const int pos = p.positions[t];
  int64_t row_index;
  if (p.kv_rows != nullptr) {
    row_index = p.kv_rows[t];
  } else {
    const int index = p.ring ? pos % p.capacity : pos;
    row_index = static_cast<int64_t>(p.token_slot[t]) * p.capacity + index;
  }
  const size_t cache_row = static_cast<size_t>(row_index < 0 ? 0 : row_index) * p.num_kv_heads * d;

  RopeAngles(pos, p.rope_pairs, p.rope_theta, d, threadIdx.x, blockDim.x, cos_t, sin_t);
  __syncthreads();
  // Launched with PDL: positions, rows and the angles above depend only on
  // the step's metadata (copied before its first kernel), so they overlap
  // the QKV projection's tail; its output is read only from here on.
  WaitForPreviousKernel();
  AllowDependentLaunch();  // the attention may launch now
  const int total = p.num_heads + 2 * p.num_kv_heads;  // q heads, k heads, v heads
  const int job = blockIdx.y * kWarps + warp;
  const bool write_kv = row_index >= 0;
  if (job < total && (job < p.num_heads || write_kv)) {
    if (job < p.num_heads) {
      NormRopeHeadTo(row + job * d, p.q_out + (static_cast<size_t>(t) * p.num_heads + job) * d, false,
                     p.q_norm, true, p, bufs[warp], cos_t, sin_t);
    } else if (job < p.num_heads + p.num_kv_heads) {
      const int j = job - p.num_heads;
      NormRopeHeadTo(row + (p.num_heads + j) * d, CacheAt(p.k_cache, p.kv_fp8, cache_row + j * d), p.kv_fp8,
                     p.k_norm, true, p, bufs[warp], cos_t, sin_t);
    } else {
      const int j = job - p.num_heads - p.num_kv_heads;
      const int src_head = p.k_eq_v ? p.num_heads + j : p.num_heads + p.num_kv_heads + j;
      NormRopeHeadTo(row + src_head * d, CacheAt(p.v_cache, p.kv_fp8, cache_row + j * d), p.kv_fp8, nullptr,
                     false, p, bufs[warp], cos_t, sin_t);
    }
  }
}

}  // namespace

std::string LaunchQkvRope(const QkvRopeParams& p, cudaStream_t stream) {
  if (!p.qkv || !p.q_norm || !p.k_norm || !p.positions || (!p.token_slot && !p.kv_rows) || !p.q_out ||
      !p.k_cache || !p.v_cache)
    return "qkv_rope: null pointer";
  if (p.num_tokens <= 0 || p.num_heads <= 0 || p.num_kv_heads <= 0 ||
      p.num_heads % p.num_kv_heads != 0)
    return "qkv_rope: bad head counts";
  if (p.head_dim <= 0 || p.head_dim % 16 != 0 || p.head_dim > kMaxHeadDim)
    return "qkv_rope: head_dim must be a multiple of 16 up to 512, got " + std::to_string(p.head_dim);
  if (p.rope_pairs < 0 || p.rope_pairs > p.head_dim / 2) return "qkv_rope: bad rope_pairs";
  if (!p.kv_rows && (p.num_slots <= 0 || p.capacity <= 0)) return "qkv_rope: bad cache shape";
  // One warp per head vector; blocks spread the heads so a decode step (one
  // token) still fills several multiprocessors.
  const dim3 grid(p.num_tokens, (p.num_heads + 2 * p.num_kv_heads + kWarps - 1) / kWarps);
  LaunchWithPdl(QkvRopeKernel, grid, dim3(kWarps * 32), 0, stream, p);
  return LaunchError("qkv_rope");
}

}  // namespace gemma::kernels
