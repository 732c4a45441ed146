// Internal: the softmax stages of the attention tile kernel: the column
// warps' S reduction, masking and scaling, the online softmax (with the
// P exchange variants) and the final row sums. tile_stages.cuh has the
// others and TileCtx.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/kernel_params.h"
#include "kernels/attention/tile_ctx.cuh"
#include "kernels/attention/tile_layout.cuh"

namespace gemma::kernels::attention {

// The full S (summed over the WD column warps, in warp order 0..WD-1) for
// this warp's n8 tiles [n_lo, n_lo + kOwn): all of them, or with PX its
// 1 / WD share. Without PX this warp's own partial comes from its registers.
template <class C>
__device__ __forceinline__ void SumColumnWarps(const TileCtx<C>& c, const float (&s)[C::MR][C::kNT][4],
                                               float (&x)[C::MR][C::kOwn][4]) {
  constexpr int MR = C::MR, WD = C::WD, kNT = C::kNT, kOwn = C::kOwn, PX = C::PX;
  if constexpr (WD > 1) {
    auto red_at = [&](int w, int i, int n) -> float4& {
      return c.red_s[(((w * C::WM + c.wm) * MR + i) * kNT + n) * 32 + c.lane];
    };
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int n = 0; n < kNT; ++n) red_at(c.wd, i, n) = make_float4(s[i][n][0], s[i][n][1], s[i][n][2], s[i][n][3]);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int j = 0; j < kOwn; ++j) {
        float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int w = 0; w < WD; ++w) {
          float4 v;
          if (!PX && w == c.wd)
            v = make_float4(s[i][j][0], s[i][j][1], s[i][j][2], s[i][j][3]);
          else
            v = red_at(w, i, c.n_lo + j);
          if (w == 0)
            t = v;
          else
            t.x += v.x, t.y += v.y, t.z += v.z, t.w += v.w;
        }
        x[i][j][0] = t.x, x[i][j][1] = t.y, x[i][j][2] = t.z, x[i][j][3] = t.w;
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int j = 0; j < kOwn; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) x[i][j][e] = s[i][j][e];
  }
}

// Masks (only tiles that cross a boundary) and scales S into log2 units.
template <class C>
__device__ __forceinline__ void MaskAndScale(const TileCtx<C>& c, int u0, const int (&row_pos)[C::MR][2],
                                             float (&x)[C::MR][C::kOwn][4]) {
  const KernelParams& p = c.p;
  const BlockRange& b = c.b;
  const bool full = u0 >= b.valid_lo && u0 + C::BN - 1 <= b.pos_first && (p.window == 0 || b.pos_last - u0 < p.window);
#pragma unroll
  for (int i = 0; i < C::MR; ++i) {
#pragma unroll
    for (int j = 0; j < C::kOwn; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = x[i][j][e] * p.scale_log2;
        if (!full) {
          const int u = u0 + (c.n_lo + j) * 8 + ((c.lane & 3) << 1) + (e & 1);
          const int pos = row_pos[i][e >> 1];
          if (u < 0 || u > pos || (p.window > 0 && pos - u >= p.window)) v = -INFINITY;
        }
        x[i][j][e] = v;
      }
    }
  }
}

// PX: this warp's P tiles (bf16) to the exchange space.
template <class C>
__device__ __forceinline__ void StoreP(const TileCtx<C>& c, const float (&x)[C::MR][C::kOwn][4]) {
#pragma unroll
  for (int i = 0; i < C::MR; ++i)
#pragma unroll
    for (int j = 0; j < C::kOwn; ++j)
      c.p_at(i, c.n_lo + j) = make_uint2(PackBf16(x[i][j][0], x[i][j][1]), PackBf16(x[i][j][2], x[i][j][3]));
}

// Online softmax; rows are spread over the 4 lanes of a quad, and with PX
// over the WD warps of a row group. PX == 1: the warps exchange their row
// maxima, then exponentiate against the row's maximum and exchange P.
// PX == 2: each warp exponentiates against its own maximum and publishes
// it with P in one exchange; a reader scales each warp's P fragments by
// 2^(its maximum - the row's maximum) (in bf16, so the row sums use the
// same rounded factors): p_scale, per source warp. x becomes P; O and the
// row sums are rescaled to the new maxima.
template <class C>
__device__ __forceinline__ void OnlineSoftmax(const TileCtx<C>& c, float (&x)[C::MR][C::kOwn][4],
                                              float (&row_max)[C::MR][2], float (&row_sum)[C::MR][2],
                                              float (&o)[C::MR][C::kDW / 8][4],
                                              __nv_bfloat162 (&p_scale)[C::MR][2][C::PX == 2 ? C::WD : 1]) {
  constexpr int MR = C::MR, WD = C::WD, kOwn = C::kOwn, PX = C::PX;
  float mx[MR][2];  // this warp's row maxima (including the running one)
#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = row_max[i][h];
#pragma unroll
      for (int j = 0; j < kOwn; ++j) m = fmaxf(m, fmaxf(x[i][j][2 * h], x[i][j][2 * h + 1]));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      mx[i][h] = m;
      if constexpr (PX != 0) {
        if ((c.lane & 3) == 0) c.max_s[c.acc_row(i, h) * WD + c.wd] = m;
      }
    }
  }
  float sum_own[MR][2];
  if constexpr (PX == 2) {
#pragma unroll
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float base = mx[i][h] == -INFINITY ? 0.f : mx[i][h];
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < kOwn; ++j) {
          x[i][j][2 * h] = Exp2(x[i][j][2 * h] - base);
          x[i][j][2 * h + 1] = Exp2(x[i][j][2 * h + 1] - base);
          sum += x[i][j][2 * h] + x[i][j][2 * h + 1];
        }
        sum_own[i][h] = sum;
      }
    }
    __syncwarp();  // all lanes have read the partials that P overwrites
    StoreP(c, x);
  }
  if constexpr (PX != 0) __syncthreads();
#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = mx[i][h];
      float v[WD];
      if constexpr (PX != 0) {
        c.row_values(c.acc_row(i, h), v);
#pragma unroll
        for (int w = 0; w < WD; ++w) m = fmaxf(m, v[w]);
      }
      const float base = m == -INFINITY ? 0.f : m;
      const float alpha = Exp2(row_max[i][h] - base);
      row_max[i][h] = m;
      if constexpr (PX == 2) {
#pragma unroll
        for (int w = 0; w < WD; ++w)
          p_scale[i][h][w] = __float2bfloat162_rn(v[w] == -INFINITY ? 0.f : Exp2(v[w] - base));
        const float own =
            mx[i][h] == -INFINITY ? 0.f : __bfloat162float(__float2bfloat16_rn(Exp2(mx[i][h] - base)));
        row_sum[i][h] = row_sum[i][h] * alpha + sum_own[i][h] * own;  // this warp's keys
      } else {
        // F8: P goes to the MMA as f16, which flushes below 2^-24: P is
        // taken 2^8 times larger (at most 256), so weights down to 2^-32 of
        // the row maximum still count, as they count in row_sum. O and
        // row_sum carry the same factor (it cancels in the normalization
        // and in the split merge, every split having it).
        const float p_base = C::F8 ? base - 8.f : base;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < kOwn; ++j) {
          x[i][j][2 * h] = Exp2(x[i][j][2 * h] - p_base);
          x[i][j][2 * h + 1] = Exp2(x[i][j][2 * h + 1] - p_base);
          sum += x[i][j][2 * h] + x[i][j][2 * h + 1];
        }
        row_sum[i][h] = row_sum[i][h] * alpha + sum;  // PX == 1: this warp's keys
      }
#pragma unroll
      for (int n = 0; n < C::kDW / 8; ++n) o[i][n][2 * h] *= alpha, o[i][n][2 * h + 1] *= alpha;
    }
  }
  if constexpr (PX == 1) {
    StoreP(c, x);
    __syncthreads();
  }
}

// The row sums over the quad's lanes, and with PX over the WD warps (every
// warp summed only its keys). PX == 1: max_s is free (its last reads came
// before the P barrier of the last tile, which every warp has passed);
// PX == 2 reads it after that barrier.
template <class C>
__device__ __forceinline__ void FinishRowSums(const TileCtx<C>& c, float (&row_sum)[C::MR][2]) {
  constexpr int MR = C::MR, WD = C::WD, PX = C::PX;
#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_sum[i][h] += __shfl_xor_sync(0xffffffffu, row_sum[i][h], 1);
      row_sum[i][h] += __shfl_xor_sync(0xffffffffu, row_sum[i][h], 2);
    }
  }
  if constexpr (PX != 0) {
    if constexpr (PX == 2) __syncthreads();
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if ((c.lane & 3) == 0) c.max_s[c.acc_row(i, h) * WD + c.wd] = row_sum[i][h];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < MR; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v[WD];
        c.row_values(c.acc_row(i, h), v);
        float t = 0.f;
#pragma unroll
        for (int w = 0; w < WD; ++w) t += v[w];
        row_sum[i][h] = t;
      }
    }
  }
}

}  // namespace gemma::kernels::attention
