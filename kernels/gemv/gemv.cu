#include "kernels/gemv/gemv.h"

#include "kernels/gemv/gemv_mma.h"

#include "kernels/common/bf16_vec.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/stream_load.cuh"

namespace gemma::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

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

template <int R, int U>
__device__ __forceinline__ void LoadTile(uint4 (&wv)[U][R], const uint4* const (&w)[R], int base, int end) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = base + 32 * u;
#pragma unroll
    for (int r = 0; r < R; ++r) wv[u][r] = c < end ? LoadStream(w[r] + c) : make_uint4(0, 0, 0, 0);
  }
}

// Sums the K-slice partials of a warp group into its first warp (part 0).
// Returns false for the other warps, which are then done.
template <int B, int R, int KS>
__device__ __forceinline__ bool ReduceGroup(float (&acc)[B][R], float (*partial)[B * R], int warp,
                                            int part, int lane) {
  if (KS == 1) return true;
  if (lane == 0) {
#pragma unroll
    for (int b = 0; b < B; ++b)
#pragma unroll
      for (int r = 0; r < R; ++r) partial[warp][b * R + r] = acc[b][r];
  }
  __syncthreads();
  if (part != 0) return false;
#pragma unroll
  for (int b = 0; b < B; ++b)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = 0.0f;
      for (int q = 0; q < KS; ++q) v += partial[warp + q][b * R + r];
      acc[b][r] = v;
    }
  return true;
}

// Lane b*R + r stores output (b, row0 + r); every lane holds every sum.
template <int B, int R>
__device__ __forceinline__ void StoreRows(const GemvParams& p, const float (&acc)[B][R], int row0, int lane) {
#pragma unroll
  for (int b = 0; b < B; ++b) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = acc[b][r];
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

// A group of KS warps owns R consecutive rows; warp `part` of the group reads
// the K slice [part, part + 1) * kvec / KS, lane l its 16-byte columns l,
// l+32, ... U column steps (R*U loads) are in flight before any is used. The
// first tile is loaded before waiting for the previous kernel: weights do not
// depend on it, so their fetch overlaps that kernel's tail.
template <int B, int R, int U, int KS>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) GemvKernel(const __grid_constant__ GemvParams p) {
  __shared__ float partial[kWarpsPerBlock][B * R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int part = warp % KS;
  const int row0 = (blockIdx.x * (kWarpsPerBlock / KS) + warp / KS) * R;
  const int kvec = p.k / 8;
  const int end = static_cast<int>(static_cast<int64_t>(kvec) * (part + 1) / KS);
  const uint4* w[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = min(row0 + r, p.n - 1);  // rows past n compute garbage, never stored
    w[r] = reinterpret_cast<const uint4*>(p.w + static_cast<size_t>(row) * p.k);
  }
  const uint4* x = reinterpret_cast<const uint4*>(p.x);
  float acc[B][R];
#pragma unroll
  for (int b = 0; b < B; ++b)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[b][r] = 0.0f;

  uint4 wv[U][R];
  int base = static_cast<int>(static_cast<int64_t>(kvec) * part / KS) + lane;
  LoadTile<R, U>(wv, w, base, end);
  WaitForPreviousKernel();
  // A PDL-launched successor (the residual norm) may now launch and load its
  // weights during this kernel.
  AllowDependentLaunch();
  while (base < end) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + 32 * u;
      if (c >= end) break;
#pragma unroll
      for (int b = 0; b < B; ++b) {
        const uint4 xv = __ldg(x + static_cast<size_t>(b) * kvec + c);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[b][r] += Dot8(wv[u][r], xv);
      }
    }
    base += 32 * U;
    if (base < end) LoadTile<R, U>(wv, w, base, end);
  }
#pragma unroll
  for (int b = 0; b < B; ++b)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[b][r] = WarpSum(acc[b][r]);
  if (!ReduceGroup<B, R, KS>(acc, partial, warp, part, lane)) return;
  StoreRows<B, R>(p, acc, row0, lane);
}

struct Variant {
  const char* name;
};
// r<rows per group>u<loads in flight per row>k<warps splitting K>
constexpr Variant kVariants[] = {{"r1u8"},   {"r2u4"},   {"r2u8"},   {"r4u4"},  {"r4u2"},
                                 {"r2u4k4"}, {"r4u2k4"}, {"r2u4k2"}, {"r1u8k4"}};
constexpr int kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);

// Launched with programmatic stream serialization, so the weight prefetch
// above overlaps the previous kernel (the kernel waits before reading x).
template <int B, int R, int U, int KS>
void Launch(const GemvParams& p, cudaStream_t stream) {
  const int rows_per_block = (kWarpsPerBlock / KS) * R;
  LaunchWithPdl(GemvKernel<B, R, U, KS>, dim3((p.n + rows_per_block - 1) / rows_per_block),
                dim3(kWarpsPerBlock * 32), 0, stream, p);
}

template <int B>
void LaunchVariant(const GemvParams& p, int variant, cudaStream_t stream) {
  switch (variant) {
    case 0: return Launch<B, 1, 8, 1>(p, stream);
    case 1: return Launch<B, 2, 4, 1>(p, stream);
    case 2: return Launch<B, 2, 8, 1>(p, stream);
    case 3: return Launch<B, 4, 4, 1>(p, stream);
    case 4: return Launch<B, 4, 2, 1>(p, stream);
    case 5: return Launch<B, 2, 4, 4>(p, stream);
    case 6: return Launch<B, 4, 2, 4>(p, stream);
    case 7: return Launch<B, 2, 4, 2>(p, stream);
    default: return Launch<B, 1, 8, 4>(p, stream);
  }
}

}  // namespace

int NumGemvVariants() { return kNumVariants + internal::NumGemvMmaTilings(); }

int NumGemvSimtVariants() { return kNumVariants; }

bool GemvVariantUsesTensorCores(int variant) {
  return variant >= kNumVariants && variant < NumGemvVariants();
}

bool GemvVariantSupportsBatch(int variant, int batch) {
  if (batch < 1 || batch > kGemvMaxBatch || variant < -1 || variant >= NumGemvVariants()) return false;
  return !GemvVariantUsesTensorCores(variant) || batch >= 2;
}

const char* GemvVariantName(int variant) {
  if (GemvVariantUsesTensorCores(variant)) return internal::GemvMmaTilingName(variant - kNumVariants);
  return variant >= 0 && variant < kNumVariants ? kVariants[variant].name : "default";
}

std::string LaunchGemv(const GemvParams& p, cudaStream_t stream) {
  if (!p.w || !p.x) return "gemv: null pointer";
  if ((p.out_bf16 == nullptr) == (p.out_f32 == nullptr)) return "gemv: need exactly one output";
  if (p.n <= 0 || p.k <= 0 || p.k % 8 != 0) return "gemv: k must be a positive multiple of 8";
  if (p.batch < 1 || p.batch > kGemvMaxBatch) return "gemv: batch must be 1..8";
  if (p.softcap > 0.0f && !p.out_f32) return "gemv: softcap needs fp32 output";
  if (p.variant < -1 || p.variant >= NumGemvVariants()) return "gemv: unknown variant";
  if (GemvVariantUsesTensorCores(p.variant)) {
    if (p.batch < 2) return "gemv: tensor-core tilings need batch 2..8";
    internal::LaunchGemvMma(p, p.variant - kNumVariants, stream);
    return LaunchError("gemv_mma");
  }
  // Untuned batch >= 2: the tensor cores (CUDA cores turn ALU-bound with batch).
  if (p.variant == -1 && p.batch >= 2) {
    internal::LaunchGemvMma(p, internal::kGemvMmaDefaultTiling, stream);
    return LaunchError("gemv_mma");
  }
  const int variant = p.variant >= 0 ? p.variant : 2;
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
