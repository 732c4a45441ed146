#include "kernels/gemv/gemv_w4a16.h"

#include <algorithm>
#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/smem_copy.cuh"
#include "kernels/common/stream_load.cuh"

namespace gemma::kernels {
namespace {

// Dynamic shared memory of the staged x (StageX): x rows at the padded k
// and a float per 32-group and column. Batch 1 fits up to k = 32 768; two
// blocks of the largest still share a multiprocessor.
constexpr int64_t kMaxStagedXBytes = 96 * 1024;
inline int64_t StagedXBytes(int batch, int k, int nt) {
  return static_cast<int64_t>(batch) * W4PaddedK(k) * 2 + W4PaddedK(k) / 32 * 8 * nt * 4;
}
// The compact form of the group sums (COMPACT below): a float per 32-group
// and batch row, rows rounded up to even, instead of per 8-column n8 tile
// (2 KB instead of 8 at batch 1 and k = 8 192).
__host__ __device__ inline int CompactSumStride(int batch) { return (batch + 1) & ~1; }
inline int64_t StagedXBytesCompact(int batch, int k) {
  return static_cast<int64_t>(batch) * W4PaddedK(k) * 2 + W4PaddedK(k) / 32 * CompactSumStride(batch) * 4;
}
// The batch-1 form (ONE_ROW below): x, then a float4 per 32-group.
inline int64_t StagedXBytesOneRow(int k) { return int64_t{W4PaddedK(k)} * 2 + W4PaddedK(k) / 32 * 16; }
// The same for the largest of `splits` even shares of K's super-chunks.
inline int64_t SplitStagedXBytes(int k, int splits) {
  return StagedXBytesOneRow((W4PaddedK(k) / 128 + splits - 1) / splits * 128);
}

// Codes p and p + 4 of a word (elements 2p and 2p+1 of its 8, by the layout)
// as bf16x2 values 128 + u, exactly: 0x4300 | u is 128 + u in bf16 (one lop3).
__device__ __forceinline__ uint32_t BiasedCodePair(uint32_t word, int p) {
  uint32_t biased;
  asm("lop3.b32 %0, %1, 0x000f000f, 0x43004300, 0xea;" : "=r"(biased) : "r"(word >> (4 * p)));
  return biased;
}
// The same pair as u - 8 (minus 136).
__device__ __forceinline__ uint32_t CodePairToBf16x2(uint32_t word, int p) {
  const uint32_t biased = BiasedCodePair(word, p);
  __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&biased);
  const __nv_bfloat162_raw offset_raw{0x4308, 0x4308};  // 136
  v = __hsub2(v, __nv_bfloat162(offset_raw));
  return *reinterpret_cast<const uint32_t*>(&v);
}

// d = a * b + c with d and c distinct (c: zeros, so partials need no reset).
__device__ __forceinline__ void MmaBf16From(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                            uint32_t b0, uint32_t b1, const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

__device__ __forceinline__ float HalfBits(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xFFFFu)));
}

__device__ __forceinline__ float GeluTanh(float x) {
  const float kAlpha = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(kAlpha * (x + 0.044715f * x * x * x)));
}

// Accumulator i of (tile r, n8 tile j): tiled row 16 (tile0 + r) + g + 8 (i / 2),
// batch row 8 j + 2 t + (i % 2). Rows of tiles past the matrix are >= n. A
// paired tiling's tiled rows map back to the matrix's (W4PairedRow), or with
// gelu_gate accumulators i and i + 2 are the gate and up sums of one output.
template <int RT, int NT>
__device__ __forceinline__ void StoreTiles(const GemvW4Params& p, const float (&acc)[RT][NT][4], int tile0, int g,
                                           int t) {
  if (p.gelu_gate) {
    const int half = p.n / 2;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const int col = (tile0 + r) * 8 + g;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int b = 8 * j + 2 * t + i;
          if (col >= half || b >= p.batch) continue;
          p.out_bf16[static_cast<size_t>(b) * half + col] = __float2bfloat16(GeluTanh(acc[r][j][i]) * acc[r][j][i + 2]);
        }
      }
    }
    return;
  }
#pragma unroll
  for (int r = 0; r < RT; ++r) {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int tiled = (tile0 + r) * 16 + g + 8 * (i / 2);
        const int b = 8 * j + 2 * t + (i % 2);
        if (tiled >= p.n || b >= p.batch) continue;
        const int row = p.paired ? static_cast<int>(W4PairedRow(tiled, p.n)) : tiled;
        const size_t o = static_cast<size_t>(b) * p.n + row;
        const float v = acc[r][j][i];
        if (p.out_f32) {
          p.out_f32[o] = p.softcap > 0.0f ? p.softcap * tanhf(v / p.softcap) : v;
        } else {
          p.out_bf16[o] = __float2bfloat16(v);
        }
      }
    }
  }
}

// One 32-group (word q of every lane-chunk) of a super-chunk: RT tiles' codes
// (wv[r][h]: rows g + 8h) and scales (sv[r], the quad's 16 bytes at 8 g + 4 h + q)
// against the x fragments xb[j] (16 bytes of x row 8 j + g, columns 8t..8t+7 of
// the group), into zeroed partials scaled into acc.
// FOLD: the codes stay biased (128 + u) and init[j] holds -136 * sum(x) of
// the group for the lane's accumulator columns, so the partial starts from it
// instead of zero: the same sum, two operations fewer per code pair.
// ONE_COL: only batch column 0 is ever stored (batch 1), so the partials of
// column 1 are not scaled into acc.
template <int RT, int NT, bool FOLD = false, bool ONE_COL = false>
__device__ __forceinline__ void MultiplyGroup(float (&acc)[RT][NT][4], const uint4 (&wv)[RT][2], const uint4 (&sv)[RT],
                                              const uint4 (&xb)[NT], int q, const float (*init)[4] = nullptr) {
  const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  auto code_pair = [](uint32_t word, int p) { return FOLD ? BiasedCodePair(word, p) : CodePairToBf16x2(word, p); };
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const uint32_t aw = (&wv[r][0].x)[q], bw = (&wv[r][1].x)[q];
    const uint32_t a0 = code_pair(aw, 0), a1 = code_pair(bw, 0);
    const uint32_t a2 = code_pair(aw, 1), a3 = code_pair(bw, 1);
    const uint32_t a4 = code_pair(aw, 2), a5 = code_pair(bw, 2);
    const uint32_t a6 = code_pair(aw, 3), a7 = code_pair(bw, 3);
    const uint32_t* sw = &sv[r].x;
    const float sa = HalfBits(sw[q / 2] >> (16 * (q % 2)));
    const float sb = HalfBits(sw[2 + q / 2] >> (16 * (q % 2)));
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      float part_acc[4];
      MmaBf16From(part_acc, a0, a1, a2, a3, xb[j].x, xb[j].y, FOLD ? init[j] : zero);
      MmaBf16(part_acc, a4, a5, a6, a7, xb[j].z, xb[j].w);
      acc[r][j][0] += sa * part_acc[0];
      if (!ONE_COL) acc[r][j][1] += sa * part_acc[1];
      acc[r][j][2] += sb * part_acc[2];
      if (!ONE_COL) acc[r][j][3] += sb * part_acc[3];
    }
  }
}

// K split inside a block: the warps of parts 1..KS-1 hand their accumulators
// to part 0's warp (warp - part) through `partial`; the barriers are
// block-uniform. On return `partial` may be reused.
template <int RT, int NT, int KS, int WARPS>
__device__ __forceinline__ void ReduceParts(float (&acc)[RT][NT][4], float (&partial)[WARPS][RT * NT * 4][32],
                                            int warp, int part, int lane) {
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][(r * NT + j) * 4 + i][lane] = acc[r][j][i];
  __syncthreads();
  if (part == 0) {
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float v = acc[r][j][i];
#pragma unroll
          for (int q = 1; q < KS; ++q) v += partial[warp + q][(r * NT + j) * 4 + i][lane];
          acc[r][j][i] = v;
        }
  }
  __syncthreads();
}

// Adds the 8 bf16 values of a 16-byte chunk of x to a group's sum, pair by
// pair.
__device__ __forceinline__ void AddChunk(const uint4& v, float& sum) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 f = __bfloat1622float2(h[e]);
    sum += f.x + f.y;
  }
}

// Staged x for the STAGE_X / async kernels, in dynamic shared memory: the
// batch's x rows at the padded k, 16-byte chunk i of row r at
// r * kchunks + (i ^ 4 (r & 1)) (two rows a quarter-warp reads together fall
// in different banks), then -136 * sum(x) of every 32-group as
// [group][8 NT columns] (columns past the batch are never written: they only
// reach accumulator columns that are never stored). Zeros past k: padding
// codes have scale 0, and 0 * x must stay 0. Ends with the block in step.
template <int NT>
__device__ __forceinline__ void StageX(const GemvW4Params& p, uint4* x_stage, int threads) {
  const int kchunks = W4PaddedK(p.k) / 8;
  for (int i = threadIdx.x; i < p.batch * kchunks; i += threads) {
    const int row = i / kchunks, ci = i - row * kchunks;
    const bool valid = 8 * ci < p.k;
    CpAsync16(SmemAddr(x_stage + row * kchunks + (ci ^ ((row & 1) << 2))),
              valid ? p.x + static_cast<size_t>(row) * p.k + 8 * ci : p.x, valid);
  }
  CpAsyncCommit();
  CpAsyncWait<0>();
  __syncthreads();
  float* sums = reinterpret_cast<float*>(x_stage + p.batch * kchunks);
  const int groups = kchunks / 4;
  for (int i = threadIdx.x; i < p.batch * groups; i += threads) {
    const int row = i / groups, grp = i - row * groups;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      AddChunk(x_stage[row * kchunks + ((4 * grp + w) ^ ((row & 1) << 2))], sum);
    }
    sums[grp * 8 * NT + row] = -136.0f * sum;
  }
  __syncthreads();
}

// The sums of 8 groups of x on the tensor cores: with lanes (g, 0..3) holding
// group g's four 16-byte chunks, the chunks are the B operand's column g, and
// a ones matrix times them gives every group's sum in two MMAs (fp32
// accumulation), where adding in fp32 took 64 conversions and adds per group.
// Lane (0, t) gets groups 2t and 2t + 1 in s[0] and s[1].
__device__ __forceinline__ void GroupSumsOnTensorCores(const uint4& v, float (&s)[4]) {
  constexpr uint32_t kOnes = 0x3F803F80u;  // bf16x2 (1, 1)
  s[0] = s[1] = s[2] = s[3] = 0.0f;
  MmaBf16(s, kOnes, kOnes, kOnes, kOnes, v.x, v.y);
  MmaBf16(s, kOnes, kOnes, kOnes, kOnes, v.z, v.w);
}

// StageX's layout written with plain loads instead of cp.async, for the
// async kernel at batches 2..8 (its X_DIRECT): StageX's wait for its own
// group would also wait for every weight stage issued before it (groups
// complete in order), so the MMAs could start only once the whole prefetched
// ring had landed. Chunks [lo, hi) of every x row (a K part's share: the
// chunks its warps read), and -136 * sum(x) of each of their 32-groups at
// [group * stride + row], stride 8 or, with COMPACT, CompactSumStride(batch).
// As in StageXOneRow, a warp copies 32 chunks of one row at a time, up to 8
// such batches in flight, and sums the groups with GroupSumsOnTensorCores. The
// rows' batches are numbered row by row; the calling warp takes index,
// index + count, ...
template <bool COMPACT>
__device__ __forceinline__ void StageXRows(const GemvW4Params& p, uint4* x_stage, int lo, int hi, int index,
                                           int count) {
  constexpr int kBatches = 8;  // batches of 32 chunks per warp whose loads fly together
  if (hi <= lo) return;  // a K part with no super-chunk
  const int lane = threadIdx.x & 31;
  const int kchunks = W4PaddedK(p.k) / 8;
  const int x_chunks = p.k / 8;  // chunks of x itself (the rest of the padded row is zeros)
  const int stride = COMPACT ? CompactSumStride(p.batch) : 8;
  float* sums = reinterpret_cast<float*>(x_stage + p.batch * kchunks);
  const int per_row = (hi - lo + 31) / 32;
  // The warp's next batch: chunks b .. b + 31 of row `row` (warp-uniform).
  int row = index / per_row, b = lo + 32 * (index - row * per_row);
  while (row < p.batch) {
    uint4 v[kBatches];
    int rows[kBatches], bs[kBatches];
#pragma unroll
    for (int u = 0; u < kBatches; ++u) {
      rows[u] = row, bs[u] = b;
      const int ci = b + lane;
      v[u] = row < p.batch && ci < hi && ci < x_chunks
                 ? __ldg(reinterpret_cast<const uint4*>(p.x + static_cast<size_t>(row) * p.k) + ci)
                 : make_uint4(0, 0, 0, 0);
      for (b += 32 * count; b >= hi; b -= 32 * per_row) ++row;
    }
#pragma unroll
    for (int u = 0; u < kBatches; ++u) {
      const int r = rows[u], c = bs[u];
      if (r >= p.batch) break;  // warp-uniform
      if (c + lane < hi) x_stage[r * kchunks + ((c + lane) ^ ((r & 1) << 2))] = v[u];
      float s[4];
      GroupSumsOnTensorCores(v[u], s);
      const int grp = c / 4 + 2 * lane;  // lanes 0..3: groups grp and grp + 1
      if (lane < 4 && 4 * grp < hi) {
        sums[grp * stride + r] = -136.0f * s[0];
        if (4 * grp + 4 < hi) sums[(grp + 1) * stride + r] = -136.0f * s[1];
      }
    }
  }
}

// The batch-1 staging (GemvW4AsyncKernel's ONE_ROW): x's 16-byte chunks
// first_chunk .. first_chunk + kchunks - 1 (the block's share of K) at
// 0 .. kchunks - 1, then -136 * sum(x) of each of its 32-groups as a float4
// that is a whole MMA accumulator operand. A warp copies 32 chunks (8 groups)
// at a time, up to 8 such batches in flight, and sums the groups with
// GroupSumsOnTensorCores. Zeros past k.
// The calling warp stages chunks [lo, hi) of the share (multiples of 16: a K
// part's chunks), starting at lo + 32 * index and stepping 32 * count, so the
// part's warps together stage what the part reads.
__device__ __forceinline__ void StageXOneRow(const GemvW4Params& p, uint4* x_stage, int first_chunk, int kchunks,
                                             int lo, int hi, int index, int count) {
  constexpr int kBatches = 8;  // batches of 32 chunks per warp whose loads fly together
  const int lane = threadIdx.x & 31;
  float4* sums = reinterpret_cast<float4*>(x_stage + kchunks);
  const uint4* x = reinterpret_cast<const uint4*>(p.x) + first_chunk;
  const int x_chunks = p.k / 8 - first_chunk;  // chunks of x itself from first_chunk on (k % 32 == 0)
  const int step = 32 * count;
  for (int base = lo + 32 * index; base < hi; base += kBatches * step) {  // warp-uniform
    uint4 v[kBatches];
#pragma unroll
    for (int u = 0; u < kBatches; ++u) {
      const int ci = base + u * step + lane;
      v[u] = ci < hi && ci < x_chunks ? __ldg(x + ci) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kBatches; ++u) {
      const int b = base + u * step;
      if (b >= hi) break;  // warp-uniform
      if (b + lane < hi) x_stage[b + lane] = v[u];
      float s[4];
      GroupSumsOnTensorCores(v[u], s);
      const int grp = b / 4 + 2 * lane;  // lanes 0..3: groups grp and grp + 1
      if (lane < 4 && 4 * grp < hi) {
        const float s0 = -136.0f * s[0], s1 = -136.0f * s[1];
        sums[grp] = make_float4(s0, s0, s0, s0);
        if (4 * grp + 4 < hi) sums[grp + 1] = make_float4(s1, s1, s1, s1);
      }
    }
  }
}

// Lane (g, t)'s partials' starting values for 32-group `group` (MultiplyGroup's FOLD).
template <int NT>
__device__ __forceinline__ void StagedGroupInit(const float* group_sums, int group, int t, float (&init)[NT][4]) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const float2 v = *reinterpret_cast<const float2*>(group_sums + group * 8 * NT + 8 * j + 2 * t);
    init[j][0] = init[j][2] = v.x;
    init[j][1] = init[j][3] = v.y;
  }
}

// A group of KS warps owns RT consecutive 16-row tiles and splits their S
// super-chunks evenly; a step covers U super-chunks. Per super-chunk a lane
// loads 2 x 16 bytes of codes and 16 bytes of scales per tile (L1 bypassed,
// evict-first in L2) and, per n8 tile and 32-group, 16 bytes of x just before
// use (x is small and shared by every warp: L1/L2 hits; the next step's lines
// are prefetched into L1 with the weights). PIPE keeps two register stages
// so a lane's next loads fly during its MMAs. Persistent launches give every
// resident block the same number of block tiles.
// STAGE_X: the block copies all of x into shared memory once, after the
// previous kernel, and the MMAs read their fragments from there (a shared
// load instead of an L1/L2 round trip per 32-group, which left warps waiting
// on x), with -136 * sum(x) of every 32-group beside it so that the codes
// need no offset subtraction (MultiplyGroup's FOLD). Dynamic shared memory:
// StagedXBytes(batch, k) <= kMaxStagedXBytes (the launcher checks).
template <int RT, int NT, int U, int KS, int WARPS, bool PIPE, bool STAGE_X>
__global__ void __launch_bounds__(WARPS * 32) GemvW4Kernel(const __grid_constant__ GemvW4Params p) {
  static_assert(WARPS % KS == 0, "K split must divide the block");
  static_assert(!STAGE_X || NT == 1, "staged x is read as one n8 tile");
  constexpr int kTilesPerBlock = (WARPS / KS) * RT;
  constexpr int kStages = PIPE ? 2 : 1;
  __shared__ float partial[KS > 1 ? WARPS : 1][KS > 1 ? RT * NT * 4 : 1][32];
  extern __shared__ uint4 x_stage[];  // STAGE_X: StageX's layout
  const float* group_sums = reinterpret_cast<const float*>(x_stage + p.batch * (W4PaddedK(p.k) / 8));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int part = warp % KS;
  const int supers = W4PaddedK(p.k) / 128;
  const int beg = supers * part / KS;
  const int end = supers * (part + 1) / KS;
  const int tiles = (p.n + 15) / 16;
  const int num_block_tiles = (tiles + kTilesPerBlock - 1) / kTilesPerBlock;

  const uint4* w[RT];   // this lane's 16 bytes of super-chunk 0, half 0
  const uint4* sc[RT];  // this quad's 16 bytes of scales of super-chunk 0
  auto set_tile = [&](int bt) {
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const int tile = min(bt * kTilesPerBlock + (warp / KS) * RT + r, tiles - 1);  // past n: never stored
      w[r] = reinterpret_cast<const uint4*>(p.w) + static_cast<size_t>(tile) * supers * 64 + lane;
      sc[r] = reinterpret_cast<const uint4*>(p.scales) + static_cast<size_t>(tile) * supers * 8 + g;
    }
  };
  uint4 wv[kStages][U][RT][2];
  uint4 sv[kStages][U][RT];
  auto load = [&](int s, int base) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + u;
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        const bool in = c < end;
        wv[s][u][r][0] = in ? LoadStream(w[r] + 64 * c) : make_uint4(0, 0, 0, 0);
        wv[s][u][r][1] = in ? LoadStream(w[r] + 64 * c + 32) : make_uint4(0, 0, 0, 0);
        sv[s][u][r] = in ? LoadStream(sc[r] + 8 * c) : make_uint4(0, 0, 0, 0);  // scale 0: contributes 0
      }
    }
  };
  // x rows 8 j + g, columns 128 c + 32 q + 8 t .. + 7.
  auto x_ptr = [&](int j, int c, int q) {
    return p.x + static_cast<size_t>(8 * j + g) * p.k + 128 * c + 32 * q + 8 * t;
  };
  auto x_ok = [&](int j, int c, int q) { return 8 * j + g < p.batch && c < end && 128 * c + 32 * q < p.k; };
  // STAGE_X (one n8 tile): the lane's x fragment for super-chunk c and
  // 32-group word q, 16 bytes of row g at columns 128 c + 32 q + 8 t, is
  // chunk 16 c + 4 (q ^ parity) + t of StageX's row: two lane pointers and
  // constant offsets instead of an address recomputed per group.
  const int x_row = g < p.batch ? g : 0;  // rows past the batch are never stored
  const uint4* x_even = x_stage + x_row * (W4PaddedK(p.k) / 8) + 4 * (x_row & 1) + t;
  const uint4* x_odd = x_stage + x_row * (W4PaddedK(p.k) / 8) + 4 * ((x_row & 1) ^ 1) + t;
  auto x_frag = [&](int j, int c, int q) {
    if constexpr (STAGE_X) {
      return (q & 1 ? x_odd : x_even)[16 * c + (q & 2 ? 8 : 0)];
    } else {
      return x_ok(j, c, q) ? __ldg(reinterpret_cast<const uint4*>(x_ptr(j, c, q))) : make_uint4(0, 0, 0, 0);
    }
  };
  auto prefetch_x = [&](int base) {
    if constexpr (!STAGE_X) {  // staged x needs no prefetch
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          // Lanes t = 0..3 cover the super-chunk's 256 bytes of row 8 j + g.
          if (x_ok(j, base + u, t)) asm volatile("prefetch.global.L1 [%0];" ::"l"(x_ptr(j, base + u, t)));
        }
      }
    }
  };
  auto multiply = [&](int s, int base, float (&acc)[RT][NT][4]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + u;
      if (STAGE_X && c >= end) break;  // warp-uniform; the staged x ends at the padded k
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // word q of each lane-chunk: 32-group 4 c + q
        uint4 xq[NT];
#pragma unroll
        for (int j = 0; j < NT; ++j) xq[j] = x_frag(j, c, q);
        if constexpr (STAGE_X) {
          float init[NT][4];
          StagedGroupInit<NT>(group_sums, 4 * c + q, t, init);
          MultiplyGroup<RT, NT, true>(acc, wv[s][u], sv[s][u], xq, q, init);
        } else {
          MultiplyGroup<RT, NT>(acc, wv[s][u], sv[s][u], xq, q);
        }
      }
    }
  };

  if (static_cast<int>(blockIdx.x) >= num_block_tiles) {  // block-uniform; never with Launch's grids
    WaitForPreviousKernel();
    return;
  }
  set_tile(blockIdx.x);
  load(0, beg);  // weights and scales do not depend on the previous kernel
  if constexpr (STAGE_X) {
    WaitForPreviousKernel();
    StageX<NT>(p, x_stage, WARPS * 32);
  }
  for (int bt = blockIdx.x; bt < num_block_tiles; bt += gridDim.x) {
    const int tile0 = bt * kTilesPerBlock + (warp / KS) * RT;
    float acc[RT][NT][4];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[r][j][i] = 0.0f;

    WaitForPreviousKernel();  // returns at once after the first tile
    AllowDependentLaunch();
    prefetch_x(beg);
    if constexpr (PIPE) {
      for (int base = beg; base < end;) {
        if (base + U < end) load(1, base + U), prefetch_x(base + U);
        multiply(0, base, acc);
        base += U;
        if (base >= end) break;
        if (base + U < end) load(0, base + U), prefetch_x(base + U);
        multiply(1, base, acc);
        base += U;
      }
    } else {
      for (int base = beg; base < end;) {
        multiply(0, base, acc);
        base += U;
        if (base < end) load(0, base), prefetch_x(base);
      }
    }
    if (bt + static_cast<int>(gridDim.x) < num_block_tiles) {  // the next tile's first loads fly meanwhile
      set_tile(bt + gridDim.x);
      load(0, beg);
    }

    if constexpr (KS > 1) ReduceParts<RT, NT, KS, WARPS>(acc, partial, warp, part, lane);
    if (part == 0) StoreTiles<RT, NT>(p, acc, tile0, g, t);
  }
}

// stage_x tilings read x from L1/L2 where it does not fit kMaxStagedXBytes.
template <int RT, int NT, int U, int KS, int WARPS, bool PIPE = true, bool persistent = false, bool stage_x = false>
void Launch(const GemvW4Params& p, cudaStream_t stream) {
  static_assert(!(persistent && stage_x), "a persistent grid is sized without dynamic shared memory");
  const int tiles_per_block = (WARPS / KS) * RT;
  const int block_tiles = ((p.n + 15) / 16 + tiles_per_block - 1) / tiles_per_block;
  if constexpr (stage_x) {
    const int64_t smem = StagedXBytes(p.batch, p.k, NT);
    if (smem <= kMaxStagedXBytes) {
      constexpr auto kernel = GemvW4Kernel<RT, NT, U, KS, WARPS, PIPE, true>;
      // Above 48 KB needs the opt-in; a failed one shows as the launch's error.
      SetSmemLimitOnThisDevice<kernel>(kMaxStagedXBytes);
      LaunchWithPdl(kernel, dim3(block_tiles), dim3(WARPS * 32), static_cast<int>(smem), stream, p);
      return;
    }
  }
  constexpr auto kernel = GemvW4Kernel<RT, NT, U, KS, WARPS, PIPE, false>;
  int blocks = block_tiles;
  if constexpr (persistent) blocks = PersistentGrid(block_tiles, ResidentBlocks<kernel>(WARPS * 32));
  LaunchWithPdl(kernel, dim3(blocks), dim3(WARPS * 32), 0, stream, p);
}

// 16-byte vectors of one ring slot (a super-chunk of one tile) of
// GemvW4AsyncKernel: 64 of codes, then 32 of scales (each lane's quad's) or
// the tile's 8.
constexpr int W4RingSlotVectors(bool shared_scales) { return shared_scales ? 72 : 96; }

// Batches 1..8 with x staged as in STAGE_X, and the weights streamed through
// a ring of STAGES super-chunk slots per lane in shared memory (cp.async, one
// commit group per super-chunk): the bytes in flight cost shared memory
// instead of registers, so more of them fly per multiprocessor. Without
// SHARED_SCALES a lane reads back only the slots it filled itself, so
// waiting for its own groups is enough (no barrier in the loop); a slot is
// refilled one iteration after its registers fed the MMAs. One block tile
// per block.
// At batch 1 the loop's instruction count bounds the kernel about as much as
// the bytes do, so every address advances by a constant per super-chunk (no
// modulo, 64-bit multiply or XOR per group) and the slot walk is one offset.
// X_DIRECT: x staged with plain loads (StageXRows, or StageXOneRow at batch
// 1), so the first MMAs wait only for the first weight stage, not for the
// whole prefetched ring; each K part stages only the chunks it reads and its
// warps wait only for each other.
// SHARED_SCALES: a slot holds the tile's 128 bytes of scales once (lanes
// 0..7 copy them) instead of each lane's quad's 16 bytes (four copies of
// each), so a slot is 1 152 bytes instead of 1 536 and more blocks fit a
// multiprocessor; lanes then read scales other lanes copied, so the warp
// synchronizes after its wait and before a slot is refilled. Its staged
// group sums take the compact form (StageXRows' COMPACT), 6 KB less
// per block at batch 1 and k = 8 192.
// ONE_ROW (batch 1 only, with X_DIRECT): every lane's x row is row 0, x is
// staged by StageXOneRow with each group's sum as a float4 that is the MMA's
// whole accumulator operand (no register copies), and column 1's partials
// are not scaled.
// PAIRS: two super-chunks per commit group, wait and iteration, so the ring's
// bookkeeping (wait, commit, slot walk, pointer steps, loop test) runs half
// as often.
// SPLITS (batch 1 only): SPLITS blocks share each block tile, block s taking
// the s-th of SPLITS even shares of K and staging only that share of x; it
// writes its fp32 partial sums to out_f32 + s n, and the consumer adds the
// SPLITS partials (GemvW4Params::partial_sums). For the 336-tile matrices
// (n = 5 376): more, smaller blocks, and x staged in pieces.
template <int RT, int STAGES, int KS, int WARPS, bool X_DIRECT = false, bool SHARED_SCALES = false,
          bool ONE_ROW = false, bool PAIRS = false, int SPLITS = 1>
__global__ void __launch_bounds__(WARPS * 32) GemvW4AsyncKernel(const __grid_constant__ GemvW4Params p) {
  static_assert(WARPS % KS == 0, "K split must divide the block");
  static_assert(SPLITS == 1 || ONE_ROW, "block splits are batch-1 tilings");
  static_assert(!SHARED_SCALES || X_DIRECT, "the compact sums are written by the X_DIRECT staging");
  static_assert(!ONE_ROW || X_DIRECT, "the one-row staging uses plain loads, as X_DIRECT");
  constexpr int NT = 1;
  constexpr int kTilesPerBlock = (WARPS / KS) * RT;
  constexpr int kSlot = W4RingSlotVectors(SHARED_SCALES);  // 16-byte vectors per (stage, tile)
  constexpr int kStage = RT * kSlot;
  constexpr int kPer = PAIRS ? 2 : 1;  // super-chunks per commit group and iteration
  static_assert(STAGES % kPer == 0, "pairs need an even ring");
  __shared__ float partial[KS > 1 ? WARPS : 1][KS > 1 ? RT * NT * 4 : 1][32];
  // [WARPS][STAGES][RT][kSlot]: codes of lanes 0..31 (two vectors each), then
  // the scales (the lanes' or the tile's), then StageX's layout.
  extern __shared__ uint4 smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int part = warp % KS;
  const int supers = W4PaddedK(p.k) / 128;
  const int split = SPLITS > 1 ? static_cast<int>(blockIdx.x % SPLITS) : 0;
  const int block_tile = SPLITS > 1 ? static_cast<int>(blockIdx.x / SPLITS) : static_cast<int>(blockIdx.x);
  // The block's share of the super-chunks: [first, first + span).
  const int first = supers * split / SPLITS;
  const int span = supers * (split + 1) / SPLITS - first;
  const int beg = first + span * part / KS;
  const int end = first + span * (part + 1) / KS;
  const int tiles = (p.n + 15) / 16;
  const int tile0 = block_tile * kTilesPerBlock + (warp / KS) * RT;
  const int sum_stride = SHARED_SCALES ? CompactSumStride(p.batch) : 8 * NT;
  const uint4* ring = smem + warp * STAGES * kStage;
  uint4* x_stage = smem + WARPS * STAGES * kStage;
  const float* group_sums = reinterpret_cast<const float*>(x_stage + p.batch * 16 * span);

  const uint4* w[RT];   // this lane's codes of the next super-chunk to issue
  const uint4* sc[RT];  // ... and the scales it copies
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const int tile = min(tile0 + r, tiles - 1);  // past n: never stored
    w[r] = reinterpret_cast<const uint4*>(p.w) + (static_cast<size_t>(tile) * supers + beg) * 64 + lane;
    sc[r] = reinterpret_cast<const uint4*>(p.scales) + (static_cast<size_t>(tile) * supers + beg) * 8 +
            (SHARED_SCALES ? (lane & 7) : g);
  }
  // Super-chunk c sits in ring stage (c - beg) % STAGES. A stage is named by
  // its offset in vectors (a multiple of kStage). Each issue() copies kPer
  // super-chunks as one commit group into the stages read in the previous
  // iteration.
  const uint32_t lane_slot = SmemAddr(ring + lane);  // the lane's codes in stage 0
  // The sources advance on every call, past the part too (never read there):
  // advanced only under the copies' condition, they were copied to other
  // registers on every call.
  auto issue = [&](int c, int stage) {  // one commit group per call (empty past the part)
    const uint32_t dst = lane_slot + stage * 16;
#pragma unroll
    for (int h = 0; h < kPer; ++h) {
#pragma unroll
      for (int r = 0; r < RT; ++r) {
        if (c + h < end) {
          const uint32_t d = dst + (h * kStage + r * kSlot) * 16;
          CpAsync16(d, w[r] + 64 * h, true);
          CpAsync16(d + 32 * 16, w[r] + 64 * h + 32, true);
          if (!SHARED_SCALES || lane < 8) CpAsync16(d + 64 * 16, sc[r] + 8 * h, true);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      w[r] += 64 * kPer;
      sc[r] += 8 * kPer;
    }
    CpAsyncCommit();
  };

#pragma unroll
  for (int i = 0; i < STAGES / kPer - 1; ++i) {
    issue(beg + i * kPer, i * kPer * kStage);  // weights do not depend on the previous kernel
  }
  WaitForPreviousKernel();
  AllowDependentLaunch();
  if constexpr (X_DIRECT) {
    // Each K part stages only the chunks it reads; its warps (every KS-th)
    // split them and wait only for each other.
    static_assert(KS < 16, "named barriers 1..15");
    const int index = KS == WARPS ? 0 : warp / KS;  // the warp's place among its part's
    if constexpr (ONE_ROW) {
      StageXOneRow(p, x_stage, 16 * first, 16 * span, 16 * (beg - first), 16 * (end - first), index, WARPS / KS);
    } else {
      StageXRows<SHARED_SCALES>(p, x_stage, 16 * beg, 16 * end, index, WARPS / KS);
    }
    if constexpr (KS == WARPS) {
      __syncwarp();
    } else {
      NamedBarrierSync(1 + part, 32 * (WARPS / KS));
    }
  } else {
    StageX<NT>(p, x_stage, WARPS * 32);  // its wait also lands the groups above
  }

  // The lane's x fragment for (c, q) is chunk 16 c + 4 (q ^ parity) + t of
  // its row in StageX's layout: q = 0 and 2 at x_even (+8 for q = 2), q = 1
  // and 3 at x_odd.
  const int x_row = !ONE_ROW && g < p.batch ? g : 0;  // rows past the batch are never stored
  const int x_par = x_row & 1;
  // (Staged from super-chunk `first` on: x rows of 16 span chunks.)
  const uint4* x_even = x_stage + x_row * 16 * span + 16 * (beg - first) + 4 * x_par + t;
  const uint4* x_odd = x_stage + x_row * 16 * span + 16 * (beg - first) + 4 * (x_par ^ 1) + t;
  // The starting sums of group 4 c + q (MultiplyGroup's FOLD) at sums + q *
  // sum_stride, or one_row_sums[q].
  const bool sum_lane = !SHARED_SCALES || 2 * t < sum_stride;  // columns past the stride start from 0
  const float* sums = group_sums + 4 * (beg - first) * sum_stride + 2 * t;
  const float4* one_row_sums = reinterpret_cast<const float4*>(group_sums) + 4 * (beg - first);

  float acc[RT][NT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[r][0][i] = 0.0f;
  const uint4* ring_lane = ring + lane;
  // Super-chunk c + h of this iteration: its codes and scales at stage + h *
  // kStage, its x and sums h super-chunks past the pointers.
  auto consume = [&](int stage, int h) {
    uint4 wv[RT][2], sv[RT];
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      wv[r][0] = ring_lane[stage + h * kStage + r * kSlot];
      wv[r][1] = ring_lane[stage + h * kStage + r * kSlot + 32];
      sv[r] = ring[stage + h * kStage + r * kSlot + 64 + (SHARED_SCALES ? g : lane)];
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint4 xq[NT] = {ONE_ROW ? x_even[16 * h + 4 * q] : (q & 1 ? x_odd : x_even)[16 * h + (q & 2 ? 8 : 0)]};
      float init[NT][4];
      if constexpr (ONE_ROW) {
        const float4 v = one_row_sums[4 * h + q];
        init[0][0] = v.x, init[0][1] = v.y, init[0][2] = v.z, init[0][3] = v.w;
      } else {
        float2 v = make_float2(0.0f, 0.0f);
        if (sum_lane) v = *reinterpret_cast<const float2*>(sums + (4 * h + q) * sum_stride);
        init[0][0] = init[0][2] = v.x;
        init[0][1] = init[0][3] = v.y;
      }
      MultiplyGroup<RT, NT, true, ONE_ROW>(acc, wv, sv, xq, q, init);
    }
  };
  int stage = 0;  // the stage of super-chunk c
  int last = (STAGES - kPer) * kStage;  // the first stage read in the previous iteration
  int c = beg;
  for (; c + kPer <= end; c += kPer) {
    if constexpr (SHARED_SCALES) __syncwarp();  // every lane read the slots issue() refills
    issue(c + STAGES - kPer, last);
    CpAsyncWait<STAGES / kPer - 1>();  // the group of super-chunk c has landed
    if constexpr (SHARED_SCALES) __syncwarp();  // ... for every lane: lanes 0..7 copied the scales
#pragma unroll
    for (int h = 0; h < kPer; ++h) consume(stage, h);
    last = stage;
    stage = stage == (STAGES - kPer) * kStage ? 0 : stage + kPer * kStage;
    x_even += 16 * kPer;
    x_odd += 16 * kPer;
    sums += 4 * kPer * sum_stride;
    one_row_sums += 4 * kPer;
  }
  if (kPer == 2 && c < end) {  // a last, odd super-chunk: its group was issued in the loop
    CpAsyncWait<0>();
    if constexpr (SHARED_SCALES) __syncwarp();
    consume(stage, 0);
  }
  CpAsyncWait<0>();

  if constexpr (KS > 1) ReduceParts<RT, NT, KS, WARPS>(acc, partial, warp, part, lane);
  if constexpr (SPLITS > 1) {
    // Batch row 0 sits in accumulators 0 (row g) and 2 (row g + 8) of lanes t = 0.
    if (part != 0 || t != 0) return;
    float* out = p.out_f32 + static_cast<size_t>(split) * p.n;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int i = 0; i < 4; i += 2) {
        const int row = (tile0 + r) * 16 + g + 4 * i;
        if (row < p.n) out[row] = acc[r][0][i];
      }
    }
    return;
  }
  if (part == 0) StoreTiles<RT, NT>(p, acc, tile0, g, t);
}

// Falls back to GemvW4Kernel's register-pipelined tiling with x from L1/L2
// where x does not fit kMaxStagedXBytes.
// SPLITS > 1: the caller has checked SplitStagedXBytes against kMaxStagedXBytes
// (a split tiling's output cannot fall back to another kernel's).
template <int RT, int STAGES, int KS, int WARPS, bool X_DIRECT = false, bool SHARED_SCALES = false,
          bool ONE_ROW = false, bool PAIRS = false, int SPLITS = 1>
void LaunchAsync(const GemvW4Params& p, cudaStream_t stream) {
  constexpr int kRingBytes = WARPS * STAGES * RT * W4RingSlotVectors(SHARED_SCALES) * 16;
  const int64_t staged = SPLITS > 1      ? SplitStagedXBytes(p.k, SPLITS)
                         : ONE_ROW       ? StagedXBytesOneRow(p.k)
                         : SHARED_SCALES ? StagedXBytesCompact(p.batch, p.k)
                                         : StagedXBytes(p.batch, p.k, 1);
  if (SPLITS == 1 && staged > kMaxStagedXBytes) return Launch<RT, 1, 2, KS, WARPS>(p, stream);
  constexpr auto kernel = GemvW4AsyncKernel<RT, STAGES, KS, WARPS, X_DIRECT, SHARED_SCALES, ONE_ROW, PAIRS, SPLITS>;
  // Above 48 KB needs the opt-in; a failed one shows as the launch's error.
  SetSmemLimitOnThisDevice<kernel>(static_cast<int>(kRingBytes + kMaxStagedXBytes));
  const int tiles_per_block = (WARPS / KS) * RT;
  const int blocks = ((p.n + 15) / 16 + tiles_per_block - 1) / tiles_per_block * SPLITS;
  LaunchWithPdl(kernel, dim3(blocks), dim3(WARPS * 32), static_cast<int>(kRingBytes + staged), stream, p);
}

// Batches above 8 (NT >= 2): reading x per warp from L1/L2 would move NT
// times the weight bytes per tile, so x is staged per block in shared memory
// instead, one 128-k chunk of every x row per K part at a time (cp.async, two
// stages, 16-byte chunks XOR-swizzled by row parity so a quarter-warp's reads
// hit distinct banks), and every warp of that K part (different row tiles)
// reads it. Weights and scales as in GemvW4Kernel, one super-chunk per step,
// two register stages. One block tile per block.
template <int RT, int NT, int KS, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) GemvW4StagedKernel(const __grid_constant__ GemvW4Params p) {
  static_assert(WARPS % KS == 0, "K split must divide the block");
  constexpr int kRows = NT * 8;
  constexpr int kTilesPerBlock = (WARPS / KS) * RT;
  extern __shared__ uint4 xs[];  // [2 stages][KS parts][kRows][16 chunks]
  __shared__ float partial[KS > 1 ? WARPS : 1][KS > 1 ? RT * NT * 4 : 1][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int part = warp % KS;
  const int supers = W4PaddedK(p.k) / 128;
  const int beg = supers * part / KS;
  const int end = supers * (part + 1) / KS;
  const int steps = (supers + KS - 1) / KS;  // the longest part's
  const int tiles = (p.n + 15) / 16;
  const int tile0 = blockIdx.x * kTilesPerBlock + (warp / KS) * RT;

  const uint4* w[RT];
  const uint4* sc[RT];
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const int tile = min(tile0 + r, tiles - 1);  // past n: never stored
    w[r] = reinterpret_cast<const uint4*>(p.w) + static_cast<size_t>(tile) * supers * 64 + lane;
    sc[r] = reinterpret_cast<const uint4*>(p.scales) + static_cast<size_t>(tile) * supers * 8 + g;
  }
  uint4 wv[2][RT][2];
  uint4 sv[2][RT];
  auto load = [&](int s, int c) {
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const bool in = c < end;
      wv[s][r][0] = in ? LoadStream(w[r] + 64 * c) : make_uint4(0, 0, 0, 0);
      wv[s][r][1] = in ? LoadStream(w[r] + 64 * c + 32) : make_uint4(0, 0, 0, 0);
      sv[s][r] = in ? LoadStream(sc[r] + 8 * c) : make_uint4(0, 0, 0, 0);
    }
  };
  // Step i's x chunks of every part into stage s (zeros past the batch, k or the part).
  auto stage_x = [&](int s, int i) {
    for (int idx = threadIdx.x; idx < KS * kRows * 16; idx += WARPS * 32) {
      const int pp = idx / (kRows * 16), rw = idx / 16 % kRows, cc = idx % 16;
      const int c = supers * pp / KS + i;
      const bool valid = c < supers * (pp + 1) / KS && rw < p.batch && 128 * c + 8 * cc < p.k;
      const __nv_bfloat16* src = valid ? p.x + static_cast<size_t>(rw) * p.k + 128 * c + 8 * cc : p.x;
      CpAsync16(SmemAddr(xs + ((s * KS + pp) * kRows + rw) * 16 + (cc ^ ((rw & 1) << 2))), src, valid);
    }
  };
  float acc[RT][NT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][j][i] = 0.0f;
  auto multiply = [&](int s) {
    const uint4* x = xs + (s * KS + part) * kRows * 16;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint4 xb[NT];
#pragma unroll
      for (int j = 0; j < NT; ++j) xb[j] = x[(8 * j + g) * 16 + ((4 * q + t) ^ ((g & 1) << 2))];
      MultiplyGroup<RT, NT>(acc, wv[s], sv[s], xb, q);
    }
  };

  load(0, beg);  // weights and scales do not depend on the previous kernel
  WaitForPreviousKernel();
  AllowDependentLaunch();
  stage_x(0, 0);
  CpAsyncCommit();
  for (int i = 0; i < steps; ++i) {
    const int s = i & 1;
    if (i + 1 < steps) {
      if (s == 0) load(1, beg + i + 1); else load(0, beg + i + 1);
      stage_x(s ^ 1, i + 1);
    }
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();  // stage s of x is in shared memory
    if (s == 0) multiply(0); else multiply(1);
    __syncthreads();  // everyone is done with stage s before step i + 2 refills it
  }

  if constexpr (KS > 1) ReduceParts<RT, NT, KS, WARPS>(acc, partial, warp, part, lane);
  if (part == 0) StoreTiles<RT, NT>(p, acc, tile0, g, t);
}

template <int RT, int NT, int KS, int WARPS>
void LaunchStaged(const GemvW4Params& p, cudaStream_t stream) {
  constexpr auto kernel = GemvW4StagedKernel<RT, NT, KS, WARPS>;
  constexpr int kSmem = 2 * KS * NT * 8 * 16 * 16;
  // Above 48 KB needs the opt-in; a failed one shows as the launch's error.
  SetSmemLimitOnThisDevice<kernel>(kSmem);
  const int tiles_per_block = (WARPS / KS) * RT;
  const int blocks = ((p.n + 15) / 16 + tiles_per_block - 1) / tiles_per_block;
  LaunchWithPdl(kernel, dim3(blocks), dim3(WARPS * 32), kSmem, stream, p);
}

// n<8-row x tiles>-t<16-row tiles per warp>u<super-chunks per step>k<warps
// splitting K>, w<warps per block> where it differs from 4 (or from k when
// k > 4); p- persistent, s- single register stage (no pipelining), x- x
// staged in shared memory (GemvW4StagedKernel), xs- all of x copied to
// shared memory once per block with its group sums (GemvW4Kernel's STAGE_X,
// up to kMaxStagedXBytes), xa- the same with the weights streamed through
// a shared-memory ring of s super-chunks per lane (GemvW4AsyncKernel), xd-
// xa- with x staged by plain loads (its X_DIRECT), xc- xd- with each slot's
// scales held once and the group sums compact (SHARED_SCALES); b1 in place of
// n1: batch 1 only (GemvW4AsyncKernel's ONE_ROW); xd2-, xc2-: two
// super-chunks per ring wait (its PAIRS); -p<S>: S blocks per block tile,
// each writing the partial sums of its share of K (its SPLITS).
struct Tiling {
  const char* name;
  int nt;  // n8 x tiles: serves batches 8 (nt / 2) + 1 .. 8 nt (1 .. 8 for nt = 1)
  void (*launch)(const GemvW4Params&, cudaStream_t);
  bool batch1_only = false;
  int splits = 1;  // > 1: partial sums only (GemvW4Params::partial_sums)
};
constexpr Tiling kTilings[] = {
    // Batches 1..8.
    {"n1-t1u4k4", 1, Launch<1, 1, 4, 4, 4>},
    {"n1-t1u2k4", 1, Launch<1, 1, 2, 4, 4>},
    {"n1-t1u4k2", 1, Launch<1, 1, 4, 2, 4>},
    {"n1-t1u4k1", 1, Launch<1, 1, 4, 1, 4>},
    {"n1-t1u4k8", 1, Launch<1, 1, 4, 8, 8>},
    {"n1-t1u2k8", 1, Launch<1, 1, 2, 8, 8>},
    {"n1-t2u2k4", 1, Launch<2, 1, 2, 4, 4>},
    {"n1-t2u2k2", 1, Launch<2, 1, 2, 2, 4>},
    {"n1-s-t1u8k4", 1, Launch<1, 1, 8, 4, 4, false>},
    {"n1-p-t1u4k4", 1, Launch<1, 1, 4, 4, 4, true, true>},
    {"n1-p-t1u4k2", 1, Launch<1, 1, 4, 2, 4, true, true>},
    {"n1-t1u2k16", 1, Launch<1, 1, 2, 16, 16>},
    {"x-n1-t1k1", 1, LaunchStaged<1, 1, 1, 4>},
    {"x-n1-t2k1", 1, LaunchStaged<2, 1, 1, 4>},
    {"x-n1-t1k2", 1, LaunchStaged<1, 1, 2, 4>},
    {"x-n1-t1k4", 1, LaunchStaged<1, 1, 4, 4>},
    {"xs-n1-t1u4k4", 1, Launch<1, 1, 4, 4, 4, true, false, true>},
    {"xs-n1-t1u2k4", 1, Launch<1, 1, 2, 4, 4, true, false, true>},
    {"xs-n1-t1u4k4w8", 1, Launch<1, 1, 4, 4, 8, true, false, true>},
    {"xs-n1-t1u2k4w8", 1, Launch<1, 1, 2, 4, 8, true, false, true>},
    {"xs-n1-t1u4k8", 1, Launch<1, 1, 4, 8, 8, true, false, true>},
    {"xs-n1-t2u2k4", 1, Launch<2, 1, 2, 4, 4, true, false, true>},
    {"xs-n1-t1u4k2", 1, Launch<1, 1, 4, 2, 4, true, false, true>},
    {"xs-n1-t2u2k4w8", 1, Launch<2, 1, 2, 4, 8, true, false, true>},
    {"xa-n1-t1s4k4", 1, LaunchAsync<1, 4, 4, 4>},
    {"xa-n1-t1s6k4", 1, LaunchAsync<1, 6, 4, 4>},
    {"xa-n1-t1s8k4", 1, LaunchAsync<1, 8, 4, 4>},
    {"xa-n1-t1s6k4w8", 1, LaunchAsync<1, 6, 4, 8>},
    {"xa-n1-t1s4k8w8", 1, LaunchAsync<1, 4, 8, 8>},
    {"xa-n1-t1s3k4", 1, LaunchAsync<1, 3, 4, 4>},
    {"xa-n1-t1s6k2", 1, LaunchAsync<1, 6, 2, 4>},
    {"xd-n1-t1s8k4", 1, LaunchAsync<1, 8, 4, 4, true>},
    {"xd-n1-t1s6k4", 1, LaunchAsync<1, 6, 4, 4, true>},
    {"xd-n1-t1s6k2", 1, LaunchAsync<1, 6, 2, 4, true>},
    {"xd-n1-t1s6k4w8", 1, LaunchAsync<1, 6, 4, 8, true>},
    {"xd-n1-t1s4k8w8", 1, LaunchAsync<1, 4, 8, 8, true>},
    {"xd-n1-t2s4k4", 1, LaunchAsync<2, 4, 4, 4, true>},
    {"xd-n1-t2s3k4", 1, LaunchAsync<2, 3, 4, 4, true>},
    {"xd-n1-t2s4k2", 1, LaunchAsync<2, 4, 2, 4, true>},
    {"xd-n1-t2s3k2", 1, LaunchAsync<2, 3, 2, 4, true>},
    {"xc-n1-t1s4k4", 1, LaunchAsync<1, 4, 4, 4, true, true>},
    {"xc-n1-t1s6k4", 1, LaunchAsync<1, 6, 4, 4, true, true>},
    {"xc-n1-t1s8k4", 1, LaunchAsync<1, 8, 4, 4, true, true>},
    {"xc-n1-t1s6k2", 1, LaunchAsync<1, 6, 2, 4, true, true>},
    {"xc-n1-t1s6k4w8", 1, LaunchAsync<1, 6, 4, 8, true, true>},
    {"xc-n1-t1s8k4w8", 1, LaunchAsync<1, 8, 4, 8, true, true>},
    {"xd-b1-t1s8k4", 1, LaunchAsync<1, 8, 4, 4, true, false, true>, true},
    {"xd-b1-t1s6k4", 1, LaunchAsync<1, 6, 4, 4, true, false, true>, true},
    {"xd-b1-t1s6k2", 1, LaunchAsync<1, 6, 2, 4, true, false, true>, true},
    {"xd-b1-t1s6k4w8", 1, LaunchAsync<1, 6, 4, 8, true, false, true>, true},
    {"xc-b1-t1s4k4", 1, LaunchAsync<1, 4, 4, 4, true, true, true>, true},
    {"xc-b1-t1s6k4", 1, LaunchAsync<1, 6, 4, 4, true, true, true>, true},
    {"xc-b1-t1s6k4w8", 1, LaunchAsync<1, 6, 4, 8, true, true, true>, true},
    {"xd-b1-t2s4k4", 1, LaunchAsync<2, 4, 4, 4, true, false, true>, true},
    {"xc-b1-t2s3k4", 1, LaunchAsync<2, 3, 4, 4, true, true, true>, true},
    {"xc-b1-t2s4k4", 1, LaunchAsync<2, 4, 4, 4, true, true, true>, true},
    {"xc-b1-t2s4k2", 1, LaunchAsync<2, 4, 2, 4, true, true, true>, true},
    {"xc-b1-t2s4k4w8", 1, LaunchAsync<2, 4, 4, 8, true, true, true>, true},
    {"xd2-b1-t1s8k4", 1, LaunchAsync<1, 8, 4, 4, true, false, true, true>, true},
    {"xc2-b1-t1s4k4", 1, LaunchAsync<1, 4, 4, 4, true, true, true, true>, true},
    {"xc2-b1-t1s6k4", 1, LaunchAsync<1, 6, 4, 4, true, true, true, true>, true},
    {"xc2-b1-t1s8k4", 1, LaunchAsync<1, 8, 4, 4, true, true, true, true>, true},
    {"xc2-b1-t1s6k4w8", 1, LaunchAsync<1, 6, 4, 8, true, true, true, true>, true},
    {"xc2-b1-t1s8k4w8", 1, LaunchAsync<1, 8, 4, 8, true, true, true, true>, true},
    {"xc2-b1-t2s4k4w8", 1, LaunchAsync<2, 4, 4, 8, true, true, true, true>, true},
    {"xc2-b1-t1s8k4-p2", 1, LaunchAsync<1, 8, 4, 4, true, true, true, true, 2>, true, 2},
    {"xc2-b1-t1s6k4-p2", 1, LaunchAsync<1, 6, 4, 4, true, true, true, true, 2>, true, 2},
    {"xc2-b1-t1s4k4-p2", 1, LaunchAsync<1, 4, 4, 4, true, true, true, true, 2>, true, 2},
    {"xc2-b1-t1s6k4w8-p2", 1, LaunchAsync<1, 6, 4, 8, true, true, true, true, 2>, true, 2},
    {"xc2-b1-t2s4k4w8-p2", 1, LaunchAsync<2, 4, 4, 8, true, true, true, true, 2>, true, 2},
    {"xc2-b1-t1s4k8w8-p2", 1, LaunchAsync<1, 4, 8, 8, true, true, true, true, 2>, true, 2},
    {"xc2-b1-t1s8k4-p3", 1, LaunchAsync<1, 8, 4, 4, true, true, true, true, 3>, true, 3},
    {"xc2-b1-t1s8k4-p4", 1, LaunchAsync<1, 8, 4, 4, true, true, true, true, 4>, true, 4},
    {"xc2-b1-t1s4k4-p4", 1, LaunchAsync<1, 4, 4, 4, true, true, true, true, 4>, true, 4},
    {"xc2-b1-t1s6k4w8-p4", 1, LaunchAsync<1, 6, 4, 8, true, true, true, true, 4>, true, 4},
    // Batches 9..16.
    {"n2-t1u4k4", 2, Launch<1, 2, 4, 4, 4>},
    {"n2-t1u2k4", 2, Launch<1, 2, 2, 4, 4>},
    {"n2-t2u2k4", 2, Launch<2, 2, 2, 4, 4>},
    {"n2-t1u4k8", 2, Launch<1, 2, 4, 8, 8>},
    {"n2-p-t1u4k4", 2, Launch<1, 2, 4, 4, 4, true, true>},
    {"x-n2-t1k1", 2, LaunchStaged<1, 2, 1, 4>},
    {"x-n2-t2k1", 2, LaunchStaged<2, 2, 1, 4>},
    {"x-n2-t1k2", 2, LaunchStaged<1, 2, 2, 4>},
    {"x-n2-t1k4", 2, LaunchStaged<1, 2, 4, 4>},
    // Batches 17..32.
    {"n4-t1u2k4", 4, Launch<1, 4, 2, 4, 4>},
    {"n4-t1u1k4", 4, Launch<1, 4, 1, 4, 4>},
    {"n4-t2u1k2", 4, Launch<2, 4, 1, 2, 4>},
    {"n4-t1u2k8", 4, Launch<1, 4, 2, 8, 8>},
    {"n4-t1u1k1", 4, Launch<1, 4, 1, 1, 4>},
    {"x-n4-t1k1", 4, LaunchStaged<1, 4, 1, 4>},
    {"x-n4-t2k1", 4, LaunchStaged<2, 4, 1, 4>},
    {"x-n4-t1k2", 4, LaunchStaged<1, 4, 2, 4>},
    {"x-n4-t2k2", 4, LaunchStaged<2, 4, 2, 4>},
    {"x-n4-t1k4", 4, LaunchStaged<1, 4, 4, 4>},
    // Batches 33..64 (GemvW4Kernel spills at two 16-row tiles per warp here).
    {"n8-t1u2k4", 8, Launch<1, 8, 2, 4, 4>},
    {"n8-t1u1k4", 8, Launch<1, 8, 1, 4, 4>},
    {"n8-t1u1k2", 8, Launch<1, 8, 1, 2, 4>},
    {"n8-t1u1k1", 8, Launch<1, 8, 1, 1, 4>},
    {"n8-t1u2k8", 8, Launch<1, 8, 2, 8, 8>},
    {"x-n8-t1k1", 8, LaunchStaged<1, 8, 1, 4>},
    {"x-n8-t2k1", 8, LaunchStaged<2, 8, 1, 4>},
    {"x-n8-t1k2", 8, LaunchStaged<1, 8, 2, 4>},
    {"x-n8-t2k2", 8, LaunchStaged<2, 8, 2, 4>},
    {"x-n8-t1k4", 8, LaunchStaged<1, 8, 4, 4>},
    {"x-n8-t1k2w8", 8, LaunchStaged<1, 8, 2, 8>},
};
constexpr int kNumTilings = sizeof(kTilings) / sizeof(kTilings[0]);

// The n8-tile count a batch runs with.
int NtFor(int batch) { return batch <= 8 ? 1 : batch <= 16 ? 2 : batch <= 32 ? 4 : 8; }

// Untuned default per width: the first tiling of that width that serves
// every batch of it.
int DefaultTiling(int batch) {
  const int nt = NtFor(batch);
  for (int v = 0; v < kNumTilings; ++v) {
    if (kTilings[v].nt == nt && !kTilings[v].batch1_only && kTilings[v].splits == 1) return v;
  }
  return 0;
}

}  // namespace

int NumGemvW4Variants() { return kNumTilings; }

const char* GemvW4VariantName(int variant) {
  return variant >= 0 && variant < kNumTilings ? kTilings[variant].name : "default";
}


int GemvW4VariantSplits(int variant) {
  return variant >= 0 && variant < kNumTilings ? kTilings[variant].splits : 1;
}

bool GemvW4VariantFits(int variant, int batch, bool partial_sums) {
  return variant >= 0 && variant < kNumTilings && batch >= 1 && batch <= kW4MaxBatch &&
         kTilings[variant].nt == NtFor(batch) && (!kTilings[variant].batch1_only || batch == 1) &&
         (kTilings[variant].splits == 1 || partial_sums);
}

std::string LaunchGemvW4(const GemvW4Params& p, cudaStream_t stream) {
  if (!p.w || !p.scales || !p.x) return "gemv_w4a16: null weights, scales or input";
  if ((p.out_bf16 == nullptr) == (p.out_f32 == nullptr)) return "gemv_w4a16: need exactly one output";
  if (p.n <= 0 || p.k <= 0 || p.k % 32 != 0) return "gemv_w4a16: need n >= 1 and k a positive multiple of 32";
  if (p.batch < 1 || p.batch > kW4MaxBatch) return "gemv_w4a16: batch must be 1..64";
  if (p.softcap > 0.0f && !p.out_f32) return "gemv_w4a16: softcap needs fp32 output";
  if (p.paired && p.n % 16 != 0) return "gemv_w4a16: a paired tiling needs n a multiple of 16";
  if (p.gelu_gate && (!p.paired || !p.out_bf16)) return "gemv_w4a16: gelu_gate needs a paired tiling and bf16 output";
  if (p.variant < -1 || p.variant >= kNumTilings) return "gemv_w4a16: unknown variant";
  if (p.partial_sums && (!p.out_f32 || p.softcap > 0.0f || p.paired || p.batch != 1)) {
    return "gemv_w4a16: partial_sums needs fp32 output, no softcap, an unpaired matrix and batch 1 (batch " +
           std::to_string(p.batch) + ")";
  }
  if (p.variant >= 0 && kTilings[p.variant].splits > 1 && !p.partial_sums) {
    return std::string("gemv_w4a16: tiling ") + kTilings[p.variant].name + " writes partial sums only";
  }
  if (p.variant >= 0 && !GemvW4VariantFits(p.variant, p.batch, p.partial_sums)) {
    return "gemv_w4a16: variant does not serve this batch size";
  }
  if (p.variant >= 0 && kTilings[p.variant].splits > 1 &&
      SplitStagedXBytes(p.k, kTilings[p.variant].splits) > kMaxStagedXBytes) {
    return "gemv_w4a16: k " + std::to_string(p.k) + " too large for tiling " + kTilings[p.variant].name;
  }
  kTilings[p.variant < 0 ? DefaultTiling(p.batch) : p.variant].launch(p, stream);
  return LaunchError("gemv_w4a16");
}

}  // namespace gemma::kernels
