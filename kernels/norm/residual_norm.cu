#include "kernels/norm/residual_norm.h"

#include <cooperative_groups.h>

#include "kernels/common/bf16_vec.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/pdl.cuh"
#include "kernels/quant/fp8_row.cuh"

namespace gemma::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;
constexpr int kMaxHidden = 16384;
// The form over a cluster (ResidualNormParams::over_cluster): blocks per token and their threads.
constexpr int kClusterBlocks = 8;
constexpr int kClusterThreads = 128;

// Vector v of token `token`'s branch, as the residual takes it: the sum of
// its fp32 partial sums (every part's load issued before any is added, so
// the parts cost one round trip; absent parts re-read the last one, a cache
// hit, and add nothing), or the bf16 branch with the scales a GEMM left.
__device__ __forceinline__ void LoadBranch(const ResidualNormParams& p, int token, int v, float (&b)[8]) {
  const size_t base = static_cast<size_t>(token) * p.hidden;
  if (p.branch_f32) {
    Load8(p.branch_f32 + base + 8 * v, b);
    if (p.branch_parts > 1) {
      const size_t part_stride = static_cast<size_t>(p.num_tokens) * p.hidden;
      float e[kMaxBranchParts - 1][8];
#pragma unroll
      for (int q = 1; q < kMaxBranchParts; ++q) {
        const int part = min(q, p.branch_parts - 1);
        Load8(p.branch_f32 + part * part_stride + base + 8 * v, e[q - 1]);
      }
#pragma unroll
      for (int q = 1; q < kMaxBranchParts; ++q) {
        if (q >= p.branch_parts) break;
#pragma unroll
        for (int j = 0; j < 8; ++j) b[j] += e[q - 1][j];
      }
    }
  } else {
    Unpack8(reinterpret_cast<const uint4*>(p.branch + base)[v], b);
    if (p.branch_col_scale != nullptr) {
      const float ts = __ldg(p.branch_token_scale + token);
      float cs[8];
      Load8(p.branch_col_scale + 8 * v, cs);
#pragma unroll
      for (int j = 0; j < 8; ++j) b[j] *= cs[j] * ts;
    }
  }
}

// One block per token; thread i owns 8-element vectors i, i + kThreads, ...
// (VPT of them) and holds them in registers from the first load to the last
// store.
// Decode (MANY false: a few tokens, one block each, latency-bound): every
// global load is issued up front — the norm weights even before waiting for
// the previous kernel (launched with PDL), the branch and the residual right
// after — so a decode step pays one memory round trip per norm, not one per
// phase (each phase reading from DRAM behind a barrier measured ~9.5 us per
// norm at batch 1, 2026-11-30).
// Prefill (MANY true: thousands of tokens, bandwidth-bound): the weights are
// read where they are used (cache hits: every block reads the same ones), so
// the registers left let three blocks share a multiprocessor (up to 6 144
// wide; two at 8 192) and one block's loads overlap another's reductions and
// stores (holding the weights too, one block fit and an 8K-token pass at the
// 31B's width ran at ~2 TB/s, 2026-12-02).
// EARLY: ResidualNormParams::launch_next_early (decode form only).
// CLUSTER (decode form, ResidualNormParams::over_cluster): a cluster of
// kClusterBlocks blocks of kClusterThreads threads per token, each taking an
// even slice of the row, whose sums of squares (and fp8 row maximum) are
// combined through distributed shared memory: a row's loads and stores then
// go through kClusterBlocks multiprocessors instead of one (at batch 1 a
// split linear's fp32 partial sums are up to 86 KB a row).
template <int VPT, bool MANY, bool EARLY = false, bool CLUSTER = false>
__global__ void __launch_bounds__(CLUSTER ? kClusterThreads : kThreads, !MANY ? 1 : VPT <= 3 ? 3 : VPT == 4 ? 2 : 1)
    ResidualNormKernel(const __grid_constant__ ResidualNormParams p) {
  static_assert(!(CLUSTER && MANY), "the cluster form is a decode form");
  constexpr int kStride = CLUSTER ? kClusterThreads : kThreads;
  __shared__ float scratch[32];
  // CLUSTER: the token is blockIdx.y and this block's vectors [first, end)
  // the rank-th of kClusterBlocks even slices of the row.
  const int token = CLUSTER ? blockIdx.y : blockIdx.x;
  const int vecs = p.hidden / 8;
  int first = 0, end = vecs, rank = 0;
  if constexpr (CLUSTER) {
    rank = static_cast<int>(cg::this_cluster().block_rank());
    const int per_block = (vecs + kClusterBlocks - 1) / kClusterBlocks;
    first = rank * per_block;
    end = min(vecs, first + per_block);
  }
  const size_t base = static_cast<size_t>(token) * p.hidden;
  const bool has_branch = p.branch != nullptr || p.branch_f32 != nullptr;
  float ow[MANY ? 1 : VPT][8], bw[MANY ? 1 : VPT][8];
  if constexpr (!MANY) {
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = first + threadIdx.x + i * kStride;
      if (v >= end) continue;
      Load8(p.out_weight + 8 * v, ow[i]);
      if (has_branch) Load8(p.branch_weight + 8 * v, bw[i]);
    }
  }
  // The weights of vector v, held in slot i (prefill: loaded now, into the one slot).
  auto weights = [&](const float* src, float (&held)[MANY ? 1 : VPT][8], int i, int v) -> const float* {
    if constexpr (MANY) {
      Load8(src + 8 * v, held[0]);
      return held[0];
    } else {
      return held[i];
    }
  };
  // The row's sum (or largest value, max) of every thread's v: over the block,
  // or with CLUSTER over the cluster's blocks through distributed shared
  // memory, in rank order (slot k of each block's block_values).
  __shared__ float block_values[CLUSTER ? 3 : 1];
  auto row_reduce = [&](float v, int k, bool max) {
    v = max ? BlockMax(v, scratch) : BlockSum(v, scratch);
    if constexpr (CLUSTER) {
      const cg::cluster_group cluster = cg::this_cluster();
      if (threadIdx.x == 0) block_values[k] = v;
      cluster.sync();
      v = 0.0f;  // amax >= 0
#pragma unroll
      for (int b = 0; b < kClusterBlocks; ++b) {
        const float u = cluster.map_shared_rank(block_values, b)[k];
        v = max ? fmaxf(v, u) : v + u;
      }
    }
    return v;
  };
  const float s = p.layer_scalar ? __ldg(p.layer_scalar) : 1.0f;
  if constexpr (EARLY) AllowDependentLaunch();
  WaitForPreviousKernel();
  if constexpr (!EARLY) AllowDependentLaunch();  // the next GEMV may prefetch its weights meanwhile

  float x[VPT][8];  // the new residual
  float* h = p.residual + base;
  float ss = 0.0f;
  if (has_branch) {
    float b[VPT][8];
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = first + threadIdx.x + i * kStride;
      if (v >= end) continue;
      LoadBranch(p, token, v, b[i]);
      Load8(h + 8 * v, x[i]);
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += b[i][j] * b[i][j];
    }
    const float rb = rsqrtf(row_reduce(ss, 0, false) / p.hidden + p.eps);
    ss = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = first + threadIdx.x + i * kStride;
      if (v >= end) continue;
      const float* w = weights(p.branch_weight, bw, i, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        x[i][j] = s * (x[i][j] + b[i][j] * rb * w[j]);
        ss += x[i][j] * x[i][j];
      }
      Store8(h + 8 * v, x[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = first + threadIdx.x + i * kStride;
      if (v >= end) continue;
      Load8(h + 8 * v, x[i]);
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += x[i][j] * x[i][j];
    }
  }
  const float r = rsqrtf(row_reduce(ss, 1, false) / p.hidden + p.eps);
  uint4 o[VPT];
  float amax = 0.0f;
  uint4* out = reinterpret_cast<uint4*>(p.out + base);
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = first + threadIdx.x + i * kStride;
    if (v >= end) continue;
    const float* w = weights(p.out_weight, ow, i, v);
    float f[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = x[i][j] * r * w[j];
    o[i] = Pack8(f);
    out[v] = o[i];
    amax = fmaxf(amax, AbsMax8(o[i]));
  }
  if (p.out_fp8 != nullptr) {
    // The codes quantize the bf16 values just stored (the same bits as
    // quantizing `out`, without re-reading it; the row's largest magnitude
    // does not depend on the order it is taken in).
    const float scale = Fp8RowScale(row_reduce(amax, CLUSTER ? 2 : 0, true));
    const float inv = 1.0f / scale;
    if (rank == 0 && threadIdx.x == 0) p.out_scale[token] = scale;
    uint2* out_fp8 = reinterpret_cast<uint2*>(p.out_fp8 + base);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = first + threadIdx.x + i * kStride;
      if (v < end) out_fp8[v] = QuantizeE4M3x8(o[i], inv);
    }
  }
  if constexpr (CLUSTER) cg::this_cluster().sync();  // no block leaves while another may still read its values
}

template <int VPT>
void LaunchOverCluster(const ResidualNormParams& p, cudaStream_t stream) {
  const dim3 grid(kClusterBlocks, p.num_tokens), block(kClusterThreads), cluster(kClusterBlocks, 1, 1);
  if (p.launch_next_early) {
    LaunchWithPdlInClusters(ResidualNormKernel<VPT, false, true, true>, grid, block, cluster, 0, stream, p);
  } else {
    LaunchWithPdlInClusters(ResidualNormKernel<VPT, false, false, true>, grid, block, cluster, 0, stream, p);
  }
}

// Token counts from here on run the prefill form (decode batches stay below).
constexpr int kManyTokens = 256;

template <int VPT>
void Launch(const ResidualNormParams& p, cudaStream_t stream) {
  if (p.num_tokens >= kManyTokens) {
    LaunchWithPdl(ResidualNormKernel<VPT, true>, dim3(p.num_tokens), dim3(kThreads), 0, stream, p);
  } else if (p.launch_next_early) {
    LaunchWithPdl(ResidualNormKernel<VPT, false, true>, dim3(p.num_tokens), dim3(kThreads), 0, stream, p);
  } else {
    LaunchWithPdl(ResidualNormKernel<VPT, false>, dim3(p.num_tokens), dim3(kThreads), 0, stream, p);
  }
}

}  // namespace

std::string LaunchResidualNorm(const ResidualNormParams& p, cudaStream_t stream) {
  if (!p.residual || !p.out_weight || !p.out) return "residual_norm: null pointer";
  if ((p.branch || p.branch_f32) && !p.branch_weight) return "residual_norm: branch without branch_weight";
  if (p.branch && p.branch_f32) return "residual_norm: give branch in one dtype";
  if (p.branch_parts < 1 || p.branch_parts > kMaxBranchParts || (p.branch_parts > 1 && !p.branch_f32)) {
    return "residual_norm: branch_parts " + std::to_string(p.branch_parts) + " needs branch_f32 and 1.." +
           std::to_string(kMaxBranchParts);
  }
  if ((p.branch_col_scale == nullptr) != (p.branch_token_scale == nullptr))
    return "residual_norm: give branch_col_scale and branch_token_scale together";
  if (p.branch_col_scale && !p.branch) return "residual_norm: branch scales need a bf16 branch";
  if (p.branch_col_scale && reinterpret_cast<uintptr_t>(p.branch_col_scale) % 16 != 0)
    return "residual_norm: branch_col_scale must be 16-byte aligned";
  if (p.out_fp8 && !p.out_scale) return "residual_norm: out_fp8 without out_scale";
  if (p.num_tokens <= 0 || p.hidden <= 0 || p.hidden % 8 != 0 || p.hidden > kMaxHidden)
    return "residual_norm: hidden must be a positive multiple of 8 up to 16384";
  auto misaligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 != 0; };
  if (misaligned(p.residual) || misaligned(p.out_weight) || (p.branch_weight && misaligned(p.branch_weight)))
    return "residual_norm: residual, out_weight and branch_weight must be 16-byte aligned";
  if (p.over_cluster) {
    if (p.num_tokens > kClusterNormMaxTokens)
      return "residual_norm: over_cluster serves up to " + std::to_string(kClusterNormMaxTokens) + " tokens, got " +
             std::to_string(p.num_tokens);
    const int per_block = (p.hidden / 8 + kClusterBlocks - 1) / kClusterBlocks;
    if (per_block <= kClusterThreads) {
      LaunchOverCluster<1>(p, stream);
    } else {
      LaunchOverCluster<2>(p, stream);  // hidden <= 16384: 256 vectors a block at most
    }
    return LaunchError("residual_norm");
  }
  const int vecs_per_thread = (p.hidden / 8 + kThreads - 1) / kThreads;
  if (vecs_per_thread <= 1) {
    Launch<1>(p, stream);
  } else if (vecs_per_thread <= 2) {
    Launch<2>(p, stream);
  } else if (vecs_per_thread <= 3) {
    Launch<3>(p, stream);
  } else if (vecs_per_thread <= 4) {
    Launch<4>(p, stream);
  } else {
    Launch<8>(p, stream);
  }
  return LaunchError("residual_norm");
}

}  // namespace gemma::kernels
