// The Hopper (sm_90a) prefill attention kernel: warp-specialized, wgmma
// for both products, bf16 or E4M3 cache. Included only by hopper_prefill.cu.
//
// A block owns BM query rows of one head (the tile kernel's row mapping:
// heads_per_block 1, tokens_per_block BM, SetUpBlock's key range) and runs
// 12 warps: two consumer warpgroups (warps 0-7) and a producer warpgroup
// (8-11). setmaxnreg moves registers from the producers (40) to the
// consumers (232): ptxas caps a 384-thread block at 168 per thread, and
// with that cap it spills and serializes the wgmmas (warning C7512).
// (Gemma 4's global layers have K != V: k_norm + RoPE on K, rms0 on V, so a
// stage holds both tiles.) Every consumer warpgroup owns 256 head_dim columns of the output (128
// fp32 accumulator registers per thread, the most a thread can hold next to
// S), so
//  - D = 512: the warpgroups split head_dim (WD = 2) over BM = 64 rows;
//    each computes a partial S = Q K^T over its 256 dims, the two exchange
//    their partials through shared memory (double-buffered by tile parity,
//    one named barrier per tile) and both run the same softmax on the sum;
//  - D = 256: each warpgroup owns 64 of BM = 128 rows (WD = 1), no exchange.
//
// Shared memory (every piece 1024-byte aligned): Q [D/64][BM][128 B], then
// STAGES x (K, V), each [D/64][BN][128 B], then the S exchange. Each
// [rows][128 B] sub-tile is 64 head_dim columns with the 128-byte swizzle
// (16-byte chunk c of row r at chunk c ^ (r % 8)), which is at once
//  - the K-major layout of Q (A) and K (B) for S = Q K^T (m64nBNk16,
//    SmemDescSw128; a k16 step is +32 bytes inside the sub-tile), and
//  - the MN-major layout of V (B) for O += P V (m64n256k16, P from
//    registers; SmemDescSw128Mn with the next 64 dims BN x 128 bytes on).
//
// Producers: the paged / slot / ring row addressing of the tile kernel;
// warp pw of the 4 copies rows pw, pw + 4, ..., 32 lanes x 16 bytes per
// cp.async; rows outside the keys that exist are zero-filled (so a
// NaN-poisoned pool never reaches P V).
// Why cp.async and not TMA: a K / V tile of BN positions spans BN /
// block_size pool blocks in any order (block_size 16 in the engine, any power
// of two allowed, entries -1 once a block leaves the window), and its rows
// at the window and length edges must read as zeros: TMA would need a box
// per block and a separate zeroing pass at the edges, cp.async does it per
// row with its source-size operand. Each stage completes on full[s] through
// cp.async.mbarrier.arrive.noinc (128 arrivals); consumers release it on
// empty[s] (8 arrivals, lane 0 of every consumer warp) after their P V.
// Over an E4M3 cache (F8 builds, QR >= 8) the producers stage the codes and
// widen them to f16 (hopper_produce.cuh, one conversion per two codes), and
// the consumers multiply f16: Q converted in shared memory once per block
// (exact for RMS-normalized queries), P packed as f16 (3 more mantissa bits
// than bf16), the same wgmma shapes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/hopper_produce.cuh"
#include "kernels/attention/kernel_params.h"
#include "kernels/attention/tile_layout.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/smem_copy.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma_bf16.cuh"

namespace gemma::kernels::attention {

// This warpgroup's Q rows [rg * 64, +64) and columns [dp * 256, +256);
// rows past the block's tokens are zeros.
template <class H>
__device__ __forceinline__ void HopperLoadQ(const KernelParams& p, const BlockRange& b, uint32_t q_smem, int rg,
                                            int dp, int t) {
  constexpr int D = H::D;
  for (int i = t; i < 64 * 32; i += 128) {
    const int row = rg * 64 + i / 32, c = dp * 32 + i % 32;
    const bool valid = row < b.num_tokens;
    const int64_t token = b.q_begin + b.token0 + (valid ? row : 0);
    CpAsync16(q_smem + SwizzledChunk<H::kBM>(row, c), p.q + (token * p.num_heads + b.head0) * D + c * 8, valid);
  }
  CpAsyncCommit();
  CpAsyncWait<0>();
  if constexpr (H::F8) {  // the E4M3 build multiplies f16: each thread converts the chunks it copied
    for (int i = t; i < 64 * 32; i += 128) {
      const uint32_t at = q_smem + SwizzledChunk<H::kBM>(rg * 64 + i / 32, dp * 32 + i % 32);
      uint32_t v[4];
      LdShared128(at, v);
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = Bf16x2ToF16x2(v[j]);
      StShared128(at, v);
    }
  }
  FenceProxyAsyncShared();  // Q is read by wgmma (async proxy)
}

// Causal / window mask (only on tiles that cross a boundary) and the scale
// into log2 units; x is this thread's S fragment (accumulator layout).
template <class H>
__device__ __forceinline__ void HopperMask(const KernelParams& p, const BlockRange& b, int u0, const int (&row_pos)[2],
                                           int lane, float (&x)[H::BN / 2]) {
  const bool full =
      u0 >= b.valid_lo && u0 + H::BN - 1 <= b.pos_first && (p.window == 0 || b.pos_last - u0 < p.window);
#pragma unroll
  for (int i = 0; i < H::BN / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = x[4 * i + e] * p.scale_log2;
      if (!full) {
        const int u = u0 + 8 * i + 2 * (lane & 3) + (e & 1), pos = row_pos[e >> 1];
        if (u < b.valid_lo || u > pos || (p.window > 0 && pos - u >= p.window)) v = -INFINITY;
      }
      x[4 * i + e] = v;
    }
}

// Online softmax of the two rows this thread holds (a row is spread over a
// lane quad): x becomes P, O and the row sums are rescaled.
template <class H>
__device__ __forceinline__ void HopperSoftmax(float (&x)[H::BN / 2], float (&row_max)[2], float (&row_sum)[2],
                                              float (&o)[128]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m = row_max[h];
#pragma unroll
    for (int i = 0; i < H::BN / 8; ++i) m = fmaxf(m, fmaxf(x[4 * i + 2 * h], x[4 * i + 2 * h + 1]));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    const float base = m == -INFINITY ? 0.f : m;
    const float alpha = Exp2(row_max[h] - base);
    row_max[h] = m;
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < H::BN / 8; ++i) {
      x[4 * i + 2 * h] = Exp2(x[4 * i + 2 * h] - base);
      x[4 * i + 2 * h + 1] = Exp2(x[4 * i + 2 * h + 1] - base);
      sum += x[4 * i + 2 * h] + x[4 * i + 2 * h + 1];
    }
    row_sum[h] = row_sum[h] * alpha + sum;
#pragma unroll
    for (int n = 0; n < 32; ++n) o[4 * n + 2 * h] *= alpha, o[4 * n + 2 * h + 1] *= alpha;
  }
}

// The E4M3 build packs P as f16 2^8 times larger (and divides the output
// back), so that f16 keeps weights down to 2^-32 of the row maximum instead
// of flushing those below 2^-24 (P <= 1: 256 is far from f16's 65504).
constexpr float kF16PScale = 256.f;

template <class H>
__device__ __forceinline__ void HopperConsume(const KernelParams& p, const BlockRange& b, uint32_t smem,
                                              float4* xch, uint64_t* full_bar, uint64_t* empty_bar) {
  constexpr int D = H::D, BN = H::BN, STAGES = H::STAGES, kBM = H::kBM;
  const int t = threadIdx.x & 127, w = threadIdx.x >> 7;
  const int warp = t >> 5, lane = t & 31;
  const int dp = w % H::kWD, rg = w / H::kWD;
  HopperLoadQ<H>(p, b, smem, rg, dp, t);
  NamedBarrierSync(2 + w, 128);
  uint32_t qf[H::QR > 0 ? H::QR : 1][4];  // ldmatrix x4: the m16k16 A fragment of each step
#pragma unroll
  for (int k = 0; k < H::QR; ++k)
    LdMatrixX4(smem + SwizzledChunk<kBM>(rg * 64 + warp * 16 + (lane & 15), dp * 32 + 2 * k + (lane >> 4)), qf[k]);
  if constexpr (H::F8) NamedBarrierSync(kQFreedBarrier, H::kThreads);  // those Q sub-tiles become staging

  int row_pos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) row_pos[h] = min(b.pos_first + rg * 64 + warp * 16 + (lane >> 2) + 8 * h, b.pos_last);
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  const uint32_t q_base = smem + static_cast<uint32_t>(dp * 4 * kBM * 128 + rg * 64 * 128);
  const uint32_t kv0 = smem + H::kQBytes;

  for (int tile = 0; tile < b.num_tiles; ++tile) {
    const int s = tile % STAGES;
    MbarWait(SmemAddr(&full_bar[s]), (tile / STAGES) & 1);
    FenceProxyAsyncShared();  // the producer's cp.async writes, now visible, before wgmma reads them
    const uint32_t ks = kv0 + static_cast<uint32_t>(s * 2 * H::kKvBytes), vs = ks + H::kKvBytes;

    float x[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) x[i] = 0.f;
    FenceRegs(x);
    WgmmaFence();
#pragma unroll
    for (int k = 0; k < 16; ++k) {  // 256 dims, 16 per step
      const uint32_t qa = q_base + (k >> 2) * (kBM * 128) + (k & 3) * 32;
      const uint32_t kb = ks + (dp * 4 + (k >> 2)) * (BN * 128) + (k & 3) * 32;
      if constexpr (H::F8) {
        if (k < H::QR)
          WgmmaF16RSK<BN>(x, qf[k < H::QR ? k : 0], SmemDescSw128(kb), k > 0);
        else
          WgmmaF16SS<BN>(x, SmemDescSw128(qa), SmemDescSw128(kb), k > 0);
      } else {
        if (k < H::QR)
          WgmmaBf16RSK<BN>(x, qf[k < H::QR ? k : 0], SmemDescSw128(kb), k > 0);
        else
          WgmmaBf16SS<BN>(x, SmemDescSw128(qa), SmemDescSw128(kb), k > 0);
      }
    }
    WgmmaCommit();
    WgmmaWait<0>();
    FenceRegs(x);

    if constexpr (H::kWD > 1) {  // sum the two warpgroups' partial S
      float4* mine = xch + ((tile & 1) * 2 + w) * (BN / 8) * 128;
      const float4* other = xch + ((tile & 1) * 2 + (1 - w)) * (BN / 8) * 128;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) mine[j * 128 + t] = make_float4(x[4 * j], x[4 * j + 1], x[4 * j + 2], x[4 * j + 3]);
      NamedBarrierSync(1, 256);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const float4 v = other[j * 128 + t];  // a + b == b + a: both warpgroups get the same bits
        x[4 * j] += v.x, x[4 * j + 1] += v.y, x[4 * j + 2] += v.z, x[4 * j + 3] += v.w;
      }
    }
    HopperMask<H>(p, b, b.tile_lo + tile * BN, row_pos, lane, x);
    HopperSoftmax<H>(x, row_max, row_sum, o);

    uint32_t a[BN / 16][4];  // P (bf16, or f16 in the E4M3 build) as the A fragments of the k16 steps
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        a[kk][q] = H::F8 ? PackF16(x[8 * kk + 2 * q] * kF16PScale, x[8 * kk + 2 * q + 1] * kF16PScale)
                         : PackBf16(x[8 * kk + 2 * q], x[8 * kk + 2 * q + 1]);
    FenceRegs(o);
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const uint64_t vb = SmemDescSw128Mn(vs + dp * 4 * (BN * 128) + kk * 16 * 128, BN * 128);
      if constexpr (H::F8)
        WgmmaF16RS<256>(o, a[kk], vb, 1);
      else
        WgmmaBf16RS<256>(o, a[kk], vb, 1);
    }
    WgmmaCommit();
    WgmmaWait<0>();
    FenceRegs(o);
    if (lane == 0) MbarArrive(SmemAddr(&empty_bar[s]));
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int r = rg * 64 + warp * 16 + (lane >> 2) + 8 * h;
    if (r >= b.num_tokens) continue;
    const float inv = sum > 0.f ? (H::F8 ? 1.f / kF16PScale : 1.f) / sum : 0.f;
    __nv_bfloat16* out =
        p.out + (static_cast<int64_t>(b.q_begin + b.token0 + r) * p.num_heads + b.head0) * D + dp * 256 + 2 * (lane & 3);
#pragma unroll
    for (int n = 0; n < 32; ++n)
      *reinterpret_cast<uint32_t*>(out + 8 * n) = PackBf16(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
  }
}

template <int D, int BN, int STAGES, int QR, bool F8>
__global__ void __launch_bounds__(384, 1) HopperPrefillKernel(const __grid_constant__ KernelParams p) {
  using H = HopperShape<D, BN, STAGES, QR, F8>;
  __shared__ __align__(8) uint64_t full_bar[STAGES];
  __shared__ __align__(8) uint64_t empty_bar[STAGES];
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t raw = SmemAddr(smem_raw);
  const uint32_t smem = (raw + (kSwizzleAtom - 1)) & ~static_cast<uint32_t>(kSwizzleAtom - 1);
  float4* xch = reinterpret_cast<float4*>(smem_raw + (smem - raw) + H::kQBytes + 2 * STAGES * H::kKvBytes);

  WaitForPreviousKernel();
  BlockRange b;
  if (!SetUpBlock<H::kBM, BN>(p, b)) return;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      MbarInit(SmemAddr(&full_bar[s]), 128);
      MbarInit(SmemAddr(&empty_bar[s]), 8);
    }
  }
  __syncthreads();
  if (threadIdx.x >= 256) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if constexpr (F8)
      HopperProduceE4m3<H>(p, b, smem + H::kQBytes, smem, full_bar, empty_bar, (threadIdx.x >> 5) & 3, threadIdx.x & 31);
    else
      HopperProduce<H>(p, b, smem + H::kQBytes, full_bar, empty_bar, (threadIdx.x >> 5) & 3, threadIdx.x & 31);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    HopperConsume<H>(p, b, smem, xch, full_bar, empty_bar);
  }
}

}  // namespace gemma::kernels::attention
