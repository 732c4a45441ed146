// Internal: what every stage of one attention tile block shares (its
// parameters, key range, warp position and shared-memory regions).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/attention/kernel_params.h"
#include "kernels/attention/tile_layout.cuh"

namespace gemma::kernels::attention {

template <class C>
struct TileCtx {
  const KernelParams& p;
  const BlockRange& b;
  int hd;                       // elements per global row of q, k, v, out (D, or less with PAD)
  int tid, lane, wm, wd;        // warp (wm, wd) of the WM x WD grid
  int n_lo;                     // first n8 tile of S this warp finishes (PX: its share)
  __nv_bfloat16* q_s;           // [kBM][D] Q tile (later the output staging)
  unsigned char* kv_s;          // K stages, then V stages
  float4* red_s;                // WD > 1: partial S tiles
  float* max_s;                 // PX: [kBM][WD] row maxima, then row sums
  uint2* p_s;                   // PX: bf16 P over red_s

  __device__ __forceinline__ unsigned char* k_stage(int stage) const { return kv_s + stage * C::S::kKStageBytes; }
  __device__ __forceinline__ unsigned char* v_stage(int stage) const {
    return kv_s + C::STAGES * C::S::kKStageBytes + stage * C::S::kKvStageBytes;
  }
  // Row (within the block) of this thread's accumulator row h of m16 tile i:
  // lane / 4 and lane / 4 + 8 of the tile.
  __device__ __forceinline__ int acc_row(int i, int h) const { return wm * C::kWR + i * 16 + (lane >> 2) + h * 8; }
  // PX: the WD per-warp values (row maxima, then row sums) of block row `row`.
  __device__ __forceinline__ void row_values(int row, float (&v)[C::WD]) const {
    if constexpr (C::WD % 4 == 0) {
#pragma unroll
      for (int q = 0; q < C::WD / 4; ++q) {
        const float4 t = reinterpret_cast<const float4*>(max_s + row * C::WD)[q];
        v[4 * q] = t.x, v[4 * q + 1] = t.y, v[4 * q + 2] = t.z, v[4 * q + 3] = t.w;
      }
    } else {
#pragma unroll
      for (int w = 0; w < C::WD; ++w) v[w] = max_s[row * C::WD + w];
    }
  }
  // Where P fragment (i, n) of this lane is exchanged. PX == 1: P (bf16)
  // over the partial-S space: every warp read its partials before the
  // maxima barrier. PX == 2: there is no such barrier, so a warp's P tiles
  // go where only it read: the first 256 bytes of warp 0's partial of the
  // same tile.
  __device__ __forceinline__ uint2& p_at(int i, int n) const {
    if constexpr (C::PX == 2)
      return reinterpret_cast<uint2*>(red_s + ((wm * C::MR + i) * C::kNT + n) * 32)[lane];
    else
      return p_s[((wm * C::MR + i) * C::kNT + n) * 32 + lane];
  }
};

}  // namespace gemma::kernels::attention
