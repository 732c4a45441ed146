#include "kernels/gemv/w4a16_chain.h"

#include <algorithm>
#include <cstdint>

#include "kernels/common/bf16_vec.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/smem_copy.cuh"
#include "kernels/gemv/w4a16_tile_math.cuh"
#include "kernels/quant/w4_layout.h"

namespace gemma::kernels {
namespace {

using namespace w4;  // NOLINT: the shared tile math

// A linear's staged x (after the ring): bf16 values at the padded k, then
// -136 * sum(x) per 32-group as [group][8] floats (StagedGroupInit's layout
// at one n8 tile; only column 0, the token, is written: the other columns
// reach accumulators that are never stored), then with a norm the k fp32
// values of h'. Bytes for a padded k:
constexpr int XBytes(int kpad, bool norm) { return kpad * 2 + kpad + (norm ? kpad * 4 : 0); }
constexpr int kMaxXBytes = XBytes(kW4ChainMaxK, false) > XBytes(kW4ChainMaxNormK, true)
                               ? XBytes(kW4ChainMaxK, false)
                               : XBytes(kW4ChainMaxNormK, true);

// The barrier's two words: arrivals of the current round, and the round.
struct BarrierWords {
  unsigned count;
  unsigned round;
};

__device__ __forceinline__ unsigned LoadAcquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Every block of the (cooperative, all-resident) grid arrives; the last one
// resets the count and starts the next round, the others wait for it. The
// writes of every block before the barrier are visible to every block after
// it. Leaves the count at zero, so the next launch starts clean.
__device__ __forceinline__ void GridBarrier(unsigned* words) {
  auto* b = reinterpret_cast<BarrierWords*>(words);
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned round = LoadAcquire(&b->round);  // read before arriving: the round cannot move yet
    __threadfence();
    if (atomicAdd(&b->count, 1u) == gridDim.x - 1) {
      atomicExch(&b->count, 0u);
      __threadfence();
      atomicAdd(&b->round, 1u);
    } else {
      while (LoadAcquire(&b->round) == round) __nanosleep(20);
    }
    __threadfence();
  }
  __syncthreads();
}

// This block's 16-row tiles of a linear: [first, last), an even split.
__device__ __forceinline__ void BlockTiles(const W4ChainLinear& l, int& first, int& last) {
  const int64_t tiles = (l.n + 15) / 16;
  first = static_cast<int>(tiles * blockIdx.x / gridDim.x);
  last = static_cast<int>(tiles * (blockIdx.x + 1) / gridDim.x);
}

// A warp's K part of a linear: super-chunks [beg, end) of every tile.
template <int WARPS>
__device__ __forceinline__ void WarpPart(const W4ChainLinear& l, int warp, int& beg, int& end) {
  const int supers = W4PaddedK(l.k) / 128;
  beg = supers * warp / WARPS;
  end = supers * (warp + 1) / WARPS;
}

// Where a warp's weight loads stand in the chain: super-chunk c of tile
// `tile` of linear li (li == count: past the end).
struct Cursor {
  int li, tile, last, c, beg, end;
};

// The first item at or after linear li (skipping linears where the block
// has no tile or the warp no super-chunk).
template <int WARPS>
__device__ __forceinline__ void EnterLinear(const W4ChainParams& p, int li, int warp, Cursor& cur) {
  for (; li < p.count; ++li) {
    int first, last, beg, end;
    BlockTiles(p.linears[li], first, last);
    WarpPart<WARPS>(p.linears[li], warp, beg, end);
    if (first < last && beg < end) {
      cur = {li, first, last, beg, beg, end};
      return;
    }
  }
  cur.li = p.count;
}

// -136 * sum(x) of every 32-group of the staged x. Ends with the block in step.
__device__ __forceinline__ void GroupSums(const uint4* xs, float* sums, int kchunks, int threads) {
  for (int grp = threadIdx.x; grp < kchunks / 4; grp += threads) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      float f[8];
      Unpack8(xs[4 * grp + w], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum += f[e];
    }
    sums[grp * 8] = -136.0f * sum;
  }
  __syncthreads();
}

// x of a linear into shared memory (L2 reads: earlier linears of this launch
// wrote it on other multiprocessors), zeros to the padded k, and the group
// sums. Ends with the block in step.
__device__ __forceinline__ void StageChainX(const W4ChainLinear& l, uint4* xs, float* sums, int threads) {
  const int kchunks = W4PaddedK(l.k) / 8;
  const uint4* x = reinterpret_cast<const uint4*>(l.x);
  for (int i = threadIdx.x; i < kchunks; i += threads) xs[i] = 8 * i < l.k ? __ldcg(x + i) : make_uint4(0, 0, 0, 0);
  __syncthreads();
  GroupSums(xs, sums, kchunks, threads);
}

// 8 fp32 values through L2 (written during this launch or just before it).
__device__ __forceinline__ void Load8Cg(const float* src, float out[8]) {
  const float4 a = __ldcg(reinterpret_cast<const float4*>(src));
  const float4 b = __ldcg(reinterpret_cast<const float4*>(src) + 1);
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

// x of a linear from its W4ChainNorm (the residual norm's formulas, in the
// same order per element), into shared memory with the group sums; `hs`
// holds h' (k floats). Block 0 stores h' to residual_out. Ends with the
// block in step.
__device__ __forceinline__ void StageChainNorm(const W4ChainLinear& l, uint4* xs, float* sums, float* hs,
                                               float* scratch, int threads) {
  const W4ChainNorm& nm = l.norm;
  const int vecs = l.k / 8, kchunks = W4PaddedK(l.k) / 8;
  const uint4* branch = reinterpret_cast<const uint4*>(nm.branch);
  float ss = 0.0f;
  for (int v = threadIdx.x; v < vecs; v += threads) {
    float b[8];
    Unpack8(__ldcg(branch + v), b);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      ss += b[j] * b[j];
      hs[8 * v + j] = b[j];
    }
  }
  const float rb = rsqrtf(BlockSum(ss, scratch) / l.k + nm.eps);
  const float s = nm.layer_scalar ? __ldg(nm.layer_scalar) : 1.0f;
  ss = 0.0f;
  for (int v = threadIdx.x; v < vecs; v += threads) {
    float h[8], w[8];
    Load8Cg(nm.residual_in + 8 * v, h);
    Load8(nm.branch_weight + 8 * v, w);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      h[j] = s * (h[j] + hs[8 * v + j] * rb * w[j]);
      ss += h[j] * h[j];
      hs[8 * v + j] = h[j];
    }
    if (blockIdx.x == 0) Store8(nm.residual_out + 8 * v, h);
  }
  const float r = rsqrtf(BlockSum(ss, scratch) / l.k + nm.eps);
  for (int v = threadIdx.x; v < kchunks; v += threads) {
    if (v >= vecs) {
      xs[v] = make_uint4(0, 0, 0, 0);
      continue;
    }
    float w[8], f[8];
    Load8(nm.out_weight + 8 * v, w);
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = hs[8 * v + j] * r * w[j];
    xs[v] = Pack8(f);
  }
  __syncthreads();
  GroupSums(xs, sums, kchunks, threads);
}

// One block per multiprocessor; the block's WARPS warps split the K of each
// of its tiles (a warp's part of every tile) and reduce through shared
// memory, warp 0 stores. Weights stream through a per-lane ring of STAGES
// super-chunk slots in shared memory (cp.async, one commit group per
// super-chunk, a lane reads back only what it filled), issued STAGES - 1
// super-chunks ahead of use along the warp's whole sequence of tiles and
// linears, so the next linear's first loads are in flight at the barrier.
template <int WARPS, int STAGES>
__global__ void __launch_bounds__(WARPS * 32, 1) W4ChainKernel(const __grid_constant__ W4ChainParams p) {
  __shared__ float partial[WARPS][4][32];
  __shared__ float scratch[32];
  extern __shared__ uint4 smem[];  // [WARPS][STAGES][3 pieces][32 lanes], then x (XBytes)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  uint4* ring = smem + warp * STAGES * 96 + lane;
  uint4* xs = smem + WARPS * STAGES * 96;

  Cursor cur;
  EnterLinear<WARPS>(p, 0, warp, cur);
  auto issue = [&](uint32_t n_issued) {  // one commit group per call (empty past the chain)
    if (cur.li < p.count) {
      const W4ChainLinear& l = p.linears[cur.li];
      const int64_t chunk = static_cast<int64_t>(cur.tile) * (W4PaddedK(l.k) / 128) + cur.c;
      const uint4* w = reinterpret_cast<const uint4*>(l.w) + chunk * 64 + lane;
      const uint4* s = reinterpret_cast<const uint4*>(l.scales) + chunk * 8 + g;
      uint4* slot = ring + (n_issued % STAGES) * 96;
      CpAsync16(SmemAddr(slot), w, true);
      CpAsync16(SmemAddr(slot + 32), w + 32, true);
      CpAsync16(SmemAddr(slot + 64), s, true);
      if (++cur.c == cur.end) {
        cur.c = cur.beg;
        if (++cur.tile == cur.last) EnterLinear<WARPS>(p, cur.li + 1, warp, cur);
      }
    }
    CpAsyncCommit();
  };
  uint32_t issued = 0, used = 0;
  for (; issued < STAGES - 1; ++issued) issue(issued);

  for (int li = 0; li < p.count; ++li) {
    const W4ChainLinear& l = p.linears[li];
    int first, last, beg, end;
    BlockTiles(l, first, last);
    WarpPart<WARPS>(l, warp, beg, end);
    if (first < last) {
      const int kchunks = W4PaddedK(l.k) / 8;
      float* sums = reinterpret_cast<float*>(xs + kchunks);
      if (l.has_norm) {
        StageChainNorm(l, xs, sums, sums + kchunks * 2, scratch, WARPS * 32);
      } else {
        StageChainX(l, xs, sums, WARPS * 32);
      }
      GemvW4Params out;  // what StoreTiles reads
      out.out_bf16 = l.out;
      out.n = l.n;
      out.k = l.k;
      out.batch = 1;
      out.paired = l.paired;
      out.gelu_gate = l.gelu_gate;
      for (int tile = first; tile < last; ++tile) {
        float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
        for (int c = beg; c < end; ++c) {
          issue(issued++);
          CpAsyncWait<STAGES - 1>();  // the group of `used` has landed
          asm volatile("" ::: "memory");  // and the slot's reads stay after the wait
          const uint4* slot = ring + (used++ % STAGES) * 96;
          const uint4 wv[1][2] = {{slot[0], slot[32]}};
          const uint4 sv[1] = {slot[64]};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const uint4 xq[1] = {xs[16 * c + 4 * q + t]};
            float init[1][4];
            StagedGroupInit<1>(sums, 4 * c + q, t, init);
            MultiplyGroup<1, 1, true>(acc, wv, sv, xq, q, init);
          }
        }
        ReduceParts<1, 1, WARPS, WARPS>(acc, partial, warp, warp, lane);
        if (warp == 0) StoreTiles<1, 1>(out, acc, tile, g, t);
      }
    }
    if (li + 1 < p.count) GridBarrier(p.barrier);
  }
  CpAsyncWait<0>();
}

template <int WARPS, int STAGES>
std::string Launch(const W4ChainParams& p, int x_bytes, cudaStream_t stream) {
  constexpr auto kernel = W4ChainKernel<WARPS, STAGES>;
  constexpr int kRingBytes = WARPS * STAGES * 96 * 16;
  // One block per multiprocessor, all resident (the launch is cooperative).
  static const int sms = [] {
    int device = 0, n = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
    return n;
  }();
  if (SetSmemLimitOnThisDevice<kernel>(kRingBytes + kMaxXBytes) != cudaSuccess) {
    return "w4a16_chain: shared memory opt-in refused";
  }
  const int smem = kRingBytes + x_bytes;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(sms);
  cfg.blockDim = dim3(WARPS * 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, kernel, p);
  return LaunchError("w4a16_chain");
}

// c-w<warps per block>s<ring stages per lane>.
struct Variant {
  const char* name;
  std::string (*launch)(const W4ChainParams&, int, cudaStream_t);  // (params, XBytes, stream)
};
constexpr Variant kVariants[] = {
    {"c-w8s8", Launch<8, 8>},   {"c-w8s6", Launch<8, 6>},   {"c-w16s4", Launch<16, 4>},
    {"c-w16s3", Launch<16, 3>}, {"c-w4s12", Launch<4, 12>}, {"c-w12s5", Launch<12, 5>},
};
constexpr int kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);

}  // namespace

size_t W4ChainBarrierBytes() { return sizeof(BarrierWords); }

int NumW4ChainVariants() { return kNumVariants; }

const char* W4ChainVariantName(int variant) {
  return variant >= 0 && variant < kNumVariants ? kVariants[variant].name : "default";
}

std::string LaunchW4Chain(const W4ChainParams& p, cudaStream_t stream) {
  if (p.count < 1 || p.count > kW4ChainMaxLinears) {
    return "w4a16_chain: count must be 1.." + std::to_string(kW4ChainMaxLinears) + ", got " + std::to_string(p.count);
  }
  if (p.barrier == nullptr || reinterpret_cast<uintptr_t>(p.barrier) % 8 != 0) {
    return "w4a16_chain: need an 8-byte aligned barrier of W4ChainBarrierBytes()";
  }
  if (p.variant < -1 || p.variant >= kNumVariants) return "w4a16_chain: unknown variant " + std::to_string(p.variant);
  int x_bytes = 0;
  for (int i = 0; i < p.count; ++i) {
    const W4ChainLinear& l = p.linears[i];
    const std::string at = "w4a16_chain: linear " + std::to_string(i) + ": ";
    if (!l.w || !l.scales || !l.out) return at + "null weights, scales or out";
    if (l.has_norm) {
      const W4ChainNorm& nm = l.norm;
      if (!nm.branch || !nm.branch_weight || !nm.residual_in || !nm.residual_out || !nm.out_weight) {
        return at + "norm: null branch, weights or residual";
      }
      if (nm.residual_in == nm.residual_out) return at + "norm: residual_out must differ from residual_in";
      if (l.k > kW4ChainMaxNormK) {
        return at + "norm: k must be at most " + std::to_string(kW4ChainMaxNormK) + ", got " + std::to_string(l.k);
      }
      const auto misaligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 != 0; };
      if (misaligned(nm.branch) || misaligned(nm.branch_weight) || misaligned(nm.residual_in) ||
          misaligned(nm.residual_out) || misaligned(nm.out_weight)) {
        return at + "norm: vectors must be 16-byte aligned";
      }
    } else if (!l.x || reinterpret_cast<uintptr_t>(l.x) % 16 != 0) {
      return at + "x must be given and 16-byte aligned";
    }
    if (l.n <= 0) return at + "n must be positive, got " + std::to_string(l.n);
    if (l.k <= 0 || l.k % 32 != 0 || l.k > kW4ChainMaxK) {
      return at + "k must be a positive multiple of 32 up to " + std::to_string(kW4ChainMaxK) + ", got " +
             std::to_string(l.k);
    }
    if (l.paired && l.n % 16 != 0) return at + "a paired tiling needs n a multiple of 16, got " + std::to_string(l.n);
    if (l.gelu_gate && !l.paired) return at + "gelu_gate needs a paired tiling";
    x_bytes = std::max(x_bytes, XBytes(W4PaddedK(l.k), l.has_norm));
  }
  return kVariants[p.variant < 0 ? 0 : p.variant].launch(p, x_bytes, stream);
}

}  // namespace gemma::kernels
