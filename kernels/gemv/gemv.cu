#include "kernels/gemv/gemv.h"

#include "kernels/common/bf16_vec.cuh"
#include "kernels/common/launch.h"

namespace gemma::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

// Weights are read exactly once per step: keep them out of L1 and ask L2 to
// fetch whole 256-byte sectors ahead.
__device__ __forceinline__ uint4 LoadStream(const uint4* ptr) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(ptr));
  return v;
}

__device__ __forceinline__ float Dot8(const uint4& w, const uint4& x) {
  const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&w);
  const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&x);
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = __bfloat1622float2(wp[i]);
    const float2 b = __bfloat1622float2(xp[i]);
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
  }
  return acc;
}

// Each warp owns R consecutive rows; lane l reads 16-byte columns l, l+32, ...
// U column steps are loaded (R*U loads in flight) before any is used.
template <int B, int R, int U>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) GemvKernel(const __grid_constant__ GemvParams p) {
  const int lane = threadIdx.x & 31;
  const int row0 = (blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5)) * R;
  if (row0 >= p.n) return;
  const int kvec = p.k / 8;
  const uint4* w[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = min(row0 + r, p.n - 1);
    w[r] = reinterpret_cast<const uint4*>(p.w + static_cast<size_t>(row) * p.k);
  }
  const uint4* x = reinterpret_cast<const uint4*>(p.x);
  float acc[B][R];
#pragma unroll
  for (int b = 0; b < B; ++b)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[b][r] = 0.0f;

  for (int base = lane; base < kvec; base += 32 * U) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r) wv[u][r] = c < kvec ? LoadStream(w[r] + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + 32 * u;
      if (c >= kvec) break;
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const uint4 xv = __ldg(x + static_cast<size_t>(b) * kvec + c);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[b][r] += Dot8(wv[u][r], xv);
      }
    }
  }
#pragma unroll
  for (int b = 0; b < B; ++b) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = WarpSum(acc[b][r]);
      if (lane == b * R + r && row0 + r < p.n) {
        const size_t o = static_cast<size_t>(b) * p.n + row0 + r;
        if (p.out_f32) {
          p.out_f32[o] = p.softcap > 0.0f ? p.softcap * tanhf(v / p.softcap) : v;
        } else {
          p.out_bf16[o] = __float2bfloat16(v);
        }
      }
    }
  }
}

struct Variant {
  int rows;
  int unroll;
  const char* name;
};
constexpr Variant kVariants[] = {
    {1, 8, "r1u8"}, {2, 4, "r2u4"}, {2, 8, "r2u8"}, {4, 4, "r4u4"}, {4, 2, "r4u2"}};
constexpr int kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);

template <int B, int R, int U>
void Launch(const GemvParams& p, cudaStream_t stream) {
  const int rows_per_block = kWarpsPerBlock * R;
  const int blocks = (p.n + rows_per_block - 1) / rows_per_block;
  GemvKernel<B, R, U><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(p);
}

template <int B>
void LaunchVariant(const GemvParams& p, int variant, cudaStream_t stream) {
  switch (variant) {
    case 0: return Launch<B, 1, 8>(p, stream);
    case 1: return Launch<B, 2, 4>(p, stream);
    case 2: return Launch<B, 2, 8>(p, stream);
    case 3: return Launch<B, 4, 4>(p, stream);
    default: return Launch<B, 4, 2>(p, stream);
  }
}

}  // namespace

int NumGemvVariants() { return kNumVariants; }

const char* GemvVariantName(int variant) {
  return variant >= 0 && variant < kNumVariants ? kVariants[variant].name : "default";
}

std::string LaunchGemv(const GemvParams& p, cudaStream_t stream) {
  if (!p.w || !p.x) return "gemv: null pointer";
  if ((p.out_bf16 == nullptr) == (p.out_f32 == nullptr)) return "gemv: need exactly one output";
  if (p.n <= 0 || p.k <= 0 || p.k % 8 != 0) return "gemv: k must be a positive multiple of 8";
  if (p.batch < 1 || p.batch > kGemvMaxBatch) return "gemv: batch must be 1..8";
  if (p.softcap > 0.0f && !p.out_f32) return "gemv: softcap needs fp32 output";
  if (p.variant < -1 || p.variant >= kNumVariants) return "gemv: unknown variant";
  // Small batches have spare registers for more loads in flight.
  const int variant = p.variant >= 0 ? p.variant : (p.batch <= 2 ? 2 : 1);
  switch (p.batch) {
    case 1: LaunchVariant<1>(p, variant, stream); break;
    case 2: LaunchVariant<2>(p, variant, stream); break;
    case 3: LaunchVariant<3>(p, variant, stream); break;
    case 4: LaunchVariant<4>(p, variant, stream); break;
    case 5: LaunchVariant<5>(p, variant, stream); break;
    case 6: LaunchVariant<6>(p, variant, stream); break;
    case 7: LaunchVariant<7>(p, variant, stream); break;
    default: LaunchVariant<8>(p, variant, stream); break;
  }
  return LaunchError("gemv");
}

}  // namespace gemma::kernels
