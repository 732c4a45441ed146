#include "kernels/norm/residual_norm.h"

#include "kernels/common/bf16_vec.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/pdl.cuh"
#include "kernels/quant/fp8_row.cuh"

namespace gemma::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxHidden = 16384;

// bf16 of row[8v .. 8v+8) * r * w.
__device__ __forceinline__ uint4 NormedVec(const float* row, float r, const float* w, int v) {
  float f[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) f[j] = row[8 * v + j] * r * w[8 * v + j];
  return Pack8(f);
}

// One block per token; the row is staged in shared memory (fp32) so the two
// reductions read it once from global memory.
__global__ void __launch_bounds__(kThreads) ResidualNormKernel(const __grid_constant__ ResidualNormParams p) {
  extern __shared__ float row[];
  __shared__ float scratch[32];
  AllowDependentLaunch();  // the next GEMV may prefetch its weights meanwhile
  const size_t base = static_cast<size_t>(blockIdx.x) * p.hidden;
  float* h = p.residual + base;
  const int vecs = p.hidden / 8;

  if (p.branch != nullptr || p.branch_f32 != nullptr) {
    float ss = 0.0f;
    for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
      float f[8];
      if (p.branch_f32) {
        const float4* b = reinterpret_cast<const float4*>(p.branch_f32 + base) + 2 * v;
        const float4 lo = b[0], hi = b[1];
        f[0] = lo.x, f[1] = lo.y, f[2] = lo.z, f[3] = lo.w, f[4] = hi.x, f[5] = hi.y, f[6] = hi.z, f[7] = hi.w;
      } else {
        Unpack8(reinterpret_cast<const uint4*>(p.branch + base)[v], f);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        row[8 * v + j] = f[j];
        ss += f[j] * f[j];
      }
    }
    const float rb = rsqrtf(BlockSum(ss, scratch) / p.hidden + p.eps);
    const float s = p.layer_scalar ? *p.layer_scalar : 1.0f;
    for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) {
      const float nv = s * (h[i] + row[i] * rb * p.branch_weight[i]);
      h[i] = nv;
      row[i] = nv;
    }
  } else {
    for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) row[i] = h[i];
  }
  __syncthreads();
  float ss = 0.0f;
  for (int i = threadIdx.x; i < p.hidden; i += blockDim.x) ss += row[i] * row[i];
  const float r = rsqrtf(BlockSum(ss, scratch) / p.hidden + p.eps);
  uint4* out = reinterpret_cast<uint4*>(p.out + base);
  float amax = 0.0f;
  for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
    const uint4 o = NormedVec(row, r, p.out_weight, v);
    out[v] = o;
    amax = fmaxf(amax, AbsMax8(o));
  }
  if (p.out_fp8 == nullptr) return;
  // The codes are recomputed from the staged row rather than re-read from
  // `out`: the same bits without a dependence on the stores above.
  const float scale = Fp8RowScale(BlockMax(amax, scratch));
  const float inv = 1.0f / scale;
  if (threadIdx.x == 0) p.out_scale[blockIdx.x] = scale;
  uint2* out_fp8 = reinterpret_cast<uint2*>(p.out_fp8 + base);
  for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
    out_fp8[v] = QuantizeE4M3x8(NormedVec(row, r, p.out_weight, v), inv);
  }
}

}  // namespace

std::string LaunchResidualNorm(const ResidualNormParams& p, cudaStream_t stream) {
  if (!p.residual || !p.out_weight || !p.out) return "residual_norm: null pointer";
  if ((p.branch || p.branch_f32) && !p.branch_weight) return "residual_norm: branch without branch_weight";
  if (p.branch && p.branch_f32) return "residual_norm: give branch in one dtype";
  if (p.out_fp8 && !p.out_scale) return "residual_norm: out_fp8 without out_scale";
  if (p.num_tokens <= 0 || p.hidden <= 0 || p.hidden % 8 != 0 || p.hidden > kMaxHidden)
    return "residual_norm: hidden must be a positive multiple of 8 up to 16384";
  const size_t smem = static_cast<size_t>(p.hidden) * sizeof(float);
  if (smem > 48 * 1024) {
    cudaFuncSetAttribute(ResidualNormKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  }
  ResidualNormKernel<<<p.num_tokens, kThreads, smem, stream>>>(p);
  return LaunchError("residual_norm");
}

}  // namespace gemma::kernels
