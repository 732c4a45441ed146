// The fused decode step (decode_fused.h): QK norms, RoPE, the newest K / V
// rows, split attention and the split merge in one kernel.
#include "kernels/attention/decode_fused.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "kernels/attention/tile_layout.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/smem_copy.cuh"
#include "kernels/rope/norm_rope_head.cuh"

namespace gemma::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int kD = 256;  // head_dim
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kChunk = 16;                    // keys per warp step: the MMA's rows
constexpr int kMaxGroup = 8;                  // query heads per KV head: the MMA's n8 columns
constexpr int kMaxSplits = 8;                 // the portable cluster size
constexpr int kUnits = kD / 8;                // 16-byte units per K / V row
constexpr int kChunkBytes = kChunk * kD * 2;  // K (or V) of one chunk
constexpr int kSlotBytes = 2 * kChunkBytes;   // K, then V
// A partial (a warp's, over its chunk buffer once its sweep is done; the
// block's):
// the unnormalized output [head][dim], then each head's max (log2 units)
// and sum.
constexpr int kPartMax = kMaxGroup * kD, kPartSum = kPartMax + kMaxGroup, kPartFloats = kPartSum + kMaxGroup;
static_assert(kPartFloats * 4 <= kSlotBytes, "a warp's partial fits its chunk buffer");

// One chunk in flight per warp: at the 31B's window and 8 splits a warp
// sweeps at most two, and a smaller block becomes resident beside the QKV
// projection's blocks sooner (with two slots, 141 KB a block, the step was
// slower than with the three kernels; with one, 0.2-0.4 ms a token faster
// on an H100).
struct Smem {
  // A warp's chunk: unit u (16 bytes) of key r at (r * kUnits + (u ^ (r & 7))) * 16.
  unsigned char chunk[kWarps][kSlotBytes];
  struct Prep {
    __nv_bfloat16 q[kMaxGroup][kD];      // the group's normed, rotated queries
    uint4 new_k[kUnits], new_v[kUnits];  // the newest position's K and V rows
    float buf[kWarps][kD];               // NormRopeHead's
    float cos_t[kD / 2], sin_t[kD / 2];
  };
  union {
    Prep prep;
    float block_part[kPartFloats];  // after the sweep: the block's partial (its warps' merged)
  };
};

struct FusedParams {
  const __nv_bfloat16* qkv;  // [tokens, qkv_width]
  int qkv_width;
  const float* q_norm;
  const float* k_norm;
  const int* kv_rows;
  int rope_pairs;
  float rope_theta, eps;
  __nv_bfloat16* k_cache;  // [rows, num_kv_heads, kD]
  __nv_bfloat16* v_cache;
  __nv_bfloat16* out;  // [tokens, num_heads, kD]
  const int* q_offsets;
  const int* q_pos0;
  const int* block_tables;
  const int* table_offsets;
  int block_shift;
  int num_heads, num_kv_heads, group, window;
  int v_head0;  // V's first head in a qkv row (K's with k_eq_v)
  float scale_log2;
};

__global__ void __launch_bounds__(kThreads, 1) FusedDecodeKernel(const __grid_constant__ FusedParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(smem_raw);
  const cg::cluster_group cluster = cg::this_cluster();
  const int kv_head = blockIdx.x, seq = blockIdx.z;
  const int splits = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;

  // The step's metadata (copied before its first kernel) and cache rows of
  // earlier steps: read before the wait, while the QKV projection finishes.
  const int token = p.q_offsets[seq];
  const bool live = p.q_offsets[seq + 1] - token == 1;
  const int pos = p.q_pos0[seq];
  const int lo = p.window > 0 ? max(0, pos - p.window + 1) : 0, hi = pos + 1;
  const int chunks = live ? (hi - lo + kChunk - 1) / kChunk : 0;
  const int per_block = (chunks + splits - 1) / splits;
  const int c_begin = min(rank * per_block, chunks), c_end = min(c_begin + per_block, chunks);
  const bool has_newest = live && chunks - 1 >= c_begin && chunks - 1 < c_end;
  // The warp's chunks: c_begin + warp + kWarps * i.
  const int my_chunks = max(0, (c_end - c_begin - warp + kWarps - 1) / kWarps);
  const int* table = p.block_tables + (live ? p.table_offsets[seq] : 0);
  const int block_mask = (1 << p.block_shift) - 1;
  const size_t row_elems = static_cast<size_t>(p.num_kv_heads) * kD;
  const uint32_t chunk_s = SmemAddr(s.chunk[warp]);

  // The warp's i-th chunk into its chunk buffer: keys past the sequence as zeros
  // (their scores are masked, and 0 * V must stay 0); the newest position is
  // left to the patch from new_k / new_v (this kernel makes it).
  auto load_chunk = [&](int i) {
    const int u0 = lo + (c_begin + warp + kWarps * i) * kChunk;
    int row = -1;
    if (const int u = u0 + (lane & 15); u < hi && u != pos)
      row = (table[u >> p.block_shift] << p.block_shift) | (u & block_mask);
    const uint32_t k_dst = chunk_s, v_dst = chunk_s + kChunkBytes;
#pragma unroll 4
    for (int j = 0; j < kChunk; ++j) {
      const int r = __shfl_sync(0xffffffffu, row, j);
      if (u0 + j == pos) continue;
      const size_t src = r >= 0 ? static_cast<size_t>(r) * row_elems + static_cast<size_t>(kv_head) * kD + 8 * lane : 0;
      const uint32_t dst = (j * kUnits + (lane ^ (j & 7))) * 16;
      CpAsync16(k_dst + dst, p.k_cache + src, r >= 0);
      CpAsync16(v_dst + dst, p.v_cache + src, r >= 0);
    }
  };
  if (my_chunks > 0) load_chunk(0);
  CpAsyncCommit();
  RopeAngles(pos, p.rope_pairs, p.rope_theta, kD, tid, kThreads, s.prep.cos_t, s.prep.sin_t);
  const int kv_row = has_newest ? p.kv_rows[token] : -1;
  __syncthreads();          // the angles
  WaitForPreviousKernel();  // the QKV projection's output
  // The output projection may launch now and prefetch its weights.
  AllowDependentLaunch();

  // The group's queries; in the block holding the newest position also its
  // K (normed, rotated) and V (rms0) rows: to the cache, and staged for the
  // warp whose chunk holds that position.
  const __nv_bfloat16* qkv_row = p.qkv + static_cast<size_t>(token) * p.qkv_width;
  const int jobs = live ? p.group + (has_newest ? 2 : 0) : 0;
  for (int j = warp; j < jobs; j += kWarps) {
    if (j < p.group) {
      __nv_bfloat16* q = s.prep.q[j];
      NormRopeHead(qkv_row + (kv_head * p.group + j) * kD, kD, p.eps, p.q_norm, true, p.rope_pairs, s.prep.cos_t,
                   s.prep.sin_t, s.prep.buf[warp], [&](int i, float v) { q[i] = __float2bfloat16(v); });
    } else {
      const bool key = j == p.group;
      const int src_head = key ? p.num_heads + kv_head : p.v_head0 + kv_head;
      __nv_bfloat16* cache = key ? p.k_cache : p.v_cache;
      __nv_bfloat16* dst = kv_row >= 0 ? cache + static_cast<size_t>(kv_row) * row_elems + kv_head * kD : nullptr;
      __nv_bfloat16* staged = reinterpret_cast<__nv_bfloat16*>(key ? s.prep.new_k : s.prep.new_v);
      NormRopeHead(qkv_row + src_head * kD, kD, p.eps, key ? p.k_norm : nullptr, key, p.rope_pairs, s.prep.cos_t,
                   s.prep.sin_t, s.prep.buf[warp], [&](int i, float v) {
                     const __nv_bfloat16 b = __float2bfloat16(v);
                     staged[i] = b;
                     if (dst != nullptr) dst[i] = b;
                   });
    }
  }
  __syncthreads();

  // Q^T as the MMA's B fragments: column g is head g of the group (zeros
  // past it; those columns are never stored).
  uint32_t qb[kD / 16][2];
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks) {
    const bool head = g < p.group;
    qb[ks][0] = head ? *reinterpret_cast<const uint32_t*>(&s.prep.q[g][16 * ks + 2 * t]) : 0u;
    qb[ks][1] = head ? *reinterpret_cast<const uint32_t*>(&s.prep.q[g][16 * ks + 8 + 2 * t]) : 0u;
  }

  // Lane (g, t) holds heads 2t + e (e = 0, 1) of the group: their running
  // max (log2 units, the same in every lane of the head), its own share of
  // the sum, and out^T: acc[m] = dims 16m + g (0, 1) and 16m + g + 8 (2, 3).
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  float acc[kD / 16][4];
#pragma unroll
  for (int m = 0; m < kD / 16; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.f;
  const int k_key = lane & 15;                        // ldmatrix row of K
  const int v_key = (lane & 7) + ((lane >> 4) << 3);  // ldmatrix.trans row of V
  const int v_half = (lane >> 3) & 1;
  for (int i = 0; i < my_chunks; ++i) {
    CpAsyncWait<0>();  // chunk i has landed
    __syncwarp();
    const int u0 = lo + (c_begin + warp + kWarps * i) * kChunk;
    const uint32_t k_s = chunk_s, v_s = chunk_s + kChunkBytes;
    if (u0 <= pos && pos < u0 + kChunk) {
      const int j = pos - u0;
      unsigned char* slot_ptr = s.chunk[warp] + (j * kUnits + (lane ^ (j & 7))) * 16;
      *reinterpret_cast<uint4*>(slot_ptr) = s.prep.new_k[lane];
      *reinterpret_cast<uint4*>(slot_ptr + kChunkBytes) = s.prep.new_v[lane];
      __syncwarp();
    }
    // S^T = K Q^T: keys g, g + 8 of the chunk, heads 2t, 2t + 1.
    float sa[4] = {0.f, 0.f, 0.f, 0.f}, sb[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int ks = 0; ks < kD / 16; ks += 2) {
      uint32_t a[4], b[4];
      LdMatrixX4(k_s + (k_key * kUnits + ((2 * ks + (lane >> 4)) ^ (lane & 7))) * 16, a);
      LdMatrixX4(k_s + (k_key * kUnits + ((2 * ks + 2 + (lane >> 4)) ^ (lane & 7))) * 16, b);
      MmaBf16(sa, a[0], a[1], a[2], a[3], qb[ks][0], qb[ks][1]);
      MmaBf16(sb, b[0], b[1], b[2], b[3], qb[ks + 1][0], qb[ks + 1][1]);
    }
    float x[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) x[q] = (sa[q] + sb[q]) * p.scale_log2;
    if (u0 + g >= hi) x[0] = x[1] = -INFINITY;
    if (u0 + g + 8 >= hi) x[2] = x[3] = -INFINITY;
    float pr[4];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float mx = fmaxf(x[e], x[2 + e]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      const float m_new = fmaxf(m_run[e], mx);  // finite: every chunk has a live key
      const float alpha = exp2f(m_run[e] - m_new);
      m_run[e] = m_new;
      pr[e] = exp2f(x[e] - m_new);
      pr[2 + e] = exp2f(x[2 + e] - m_new);
      l_run[e] = l_run[e] * alpha + pr[e] + pr[2 + e];
#pragma unroll
      for (int m = 0; m < kD / 16; ++m) {
        acc[m][e] *= alpha;
        acc[m][2 + e] *= alpha;
      }
    }
    // P^T as B fragments: the score fragment transposed (keys 2t, 2t + 1 and
    // 2t + 8, 2t + 9 of head g).
    const uint32_t b0 = attention::Movmatrix8x8Trans(attention::PackBf16(pr[0], pr[1]));
    const uint32_t b1 = attention::Movmatrix8x8Trans(attention::PackBf16(pr[2], pr[3]));
#pragma unroll
    for (int m = 0; m < kD / 16; ++m) {
      uint32_t a[4];
      LdMatrixX4Trans(v_s + (v_key * kUnits + ((2 * m + v_half) ^ (v_key & 7))) * 16, a);
      MmaBf16(acc[m], a[0], a[1], a[2], a[3], b0, b1);
    }
    __syncwarp();  // every lane is done with the chunk buffer
    if (i + 1 < my_chunks) load_chunk(i + 1);
    CpAsyncCommit();
  }
  CpAsyncWait<0>();
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    l_run[e] += __shfl_xor_sync(0xffffffffu, l_run[e], 4);
    l_run[e] += __shfl_xor_sync(0xffffffffu, l_run[e], 8);
    l_run[e] += __shfl_xor_sync(0xffffffffu, l_run[e], 16);
  }
  __syncwarp();
  float* part = reinterpret_cast<float*>(s.chunk[warp]);
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int h = 2 * t + e;
    if (h >= p.group) continue;
#pragma unroll
    for (int m = 0; m < kD / 16; ++m) {
      part[h * kD + 16 * m + g] = acc[m][e];
      part[h * kD + 16 * m + g + 8] = acc[m][2 + e];
    }
    if (g == 0) {
      part[kPartMax + h] = m_run[e];
      part[kPartSum + h] = l_run[e];
    }
  }
  __syncthreads();  // every warp's partial is in place

  // The block's partial: its warps' merged.
  for (int f = tid; f < p.group * kD; f += kThreads) {
    const int h = f / kD, d = f - h * kD;
    float mw[kWarps], m_all = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      mw[w] = reinterpret_cast<const float*>(s.chunk[w])[kPartMax + h];
      m_all = fmaxf(m_all, mw[w]);
    }
    float a = 0.f, l = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      if (mw[w] == -INFINITY) continue;  // no keys
      const float* wp = reinterpret_cast<const float*>(s.chunk[w]);
      const float weight = exp2f(mw[w] - m_all);
      a += weight * wp[h * kD + d];
      l += weight * wp[kPartSum + h];
    }
    s.block_part[h * kD + d] = a;
    if (d == 0) {
      s.block_part[kPartMax + h] = m_all;
      s.block_part[kPartSum + h] = l;
    }
  }
  cluster.sync();  // every block's partial of the cluster is in place

  // Block `rank` merges its share of the group's head x dim outputs over the
  // cluster's blocks, all their loads in flight at once.
  if (live) {
    const int total = p.group * kD, per = (total + splits - 1) / splits;
    const int f_end = min(total, (rank + 1) * per);
    for (int f = rank * per + tid; f < f_end; f += kThreads) {
      const int h = f / kD, d = f - h * kD;
      float mb[kMaxSplits], ab[kMaxSplits], lb[kMaxSplits];
#pragma unroll
      for (int b = 0; b < kMaxSplits; ++b) {
        mb[b] = -INFINITY, ab[b] = lb[b] = 0.f;
        if (b < splits) {
          const float* remote = cluster.map_shared_rank(s.block_part, b);
          mb[b] = remote[kPartMax + h];
          ab[b] = remote[h * kD + d];
          lb[b] = remote[kPartSum + h];
        }
      }
      float m_all = -INFINITY;
#pragma unroll
      for (int b = 0; b < kMaxSplits; ++b) m_all = fmaxf(m_all, mb[b]);
      float num = 0.f, den = 0.f;
#pragma unroll
      for (int b = 0; b < kMaxSplits; ++b) {
        if (mb[b] == -INFINITY) continue;  // no keys
        const float weight = exp2f(mb[b] - m_all);
        num += weight * ab[b];
        den += weight * lb[b];
      }
      p.out[(static_cast<size_t>(token) * p.num_heads + kv_head * p.group + h) * kD + d] = __float2bfloat16(num / den);
    }
  }
  cluster.sync();  // no block leaves while another still reads its partials
}

}  // namespace

std::string FusedDecodeRefusal(const QkvRopeParams& rope, const AttentionParams& attn) {
  if (attn.kv_fp8 || rope.kv_fp8) return "an E4M3 cache";
  if (attn.head_dim != kD || rope.head_dim != kD) return "head_dim " + std::to_string(attn.head_dim) + " (serves 256)";
  if (attn.block_tables == nullptr || attn.table_offsets == nullptr || rope.kv_rows == nullptr)
    return "a slot cache (serves paged)";
  if (attn.max_q_len != 1) return "max_q_len " + std::to_string(attn.max_q_len) + " (serves 1)";
  if (!attn.length_aware) return "a length-unaware sweep";
  if (attn.window <= 0 || attn.window > kFusedDecodeMaxWindow)
    return "window " + std::to_string(attn.window) + " (serves sliding windows of 1.." +
           std::to_string(kFusedDecodeMaxWindow) + ")";
  if (attn.keys_from_values != nullptr) return "keys from values";
  if (attn.num_heads != rope.num_heads || attn.num_kv_heads != rope.num_kv_heads)
    return "head counts that differ between QKV-RoPE and attention";
  if (attn.num_heads <= 0 || attn.num_kv_heads <= 0 || attn.num_heads % attn.num_kv_heads != 0 ||
      attn.num_heads / attn.num_kv_heads > kMaxGroup)
    return std::to_string(attn.num_heads) + " query heads over " + std::to_string(attn.num_kv_heads) +
           " KV heads (serves GQA groups of 1..8)";
  if (attn.num_seqs < 1 || attn.num_seqs > kFusedDecodeMaxSeqs)
    return std::to_string(attn.num_seqs) + " sequences (serves 1.." + std::to_string(kFusedDecodeMaxSeqs) + ")";
  if (attn.block_size <= 0 || (attn.block_size & (attn.block_size - 1)) != 0)
    return "block_size " + std::to_string(attn.block_size) + " (a power of two)";
  if (rope.rope_pairs < 0 || rope.rope_pairs > kD / 2) return "rope_pairs " + std::to_string(rope.rope_pairs);
  if (!rope.qkv || !rope.q_norm || !rope.k_norm || !attn.out || !attn.k_cache || !attn.v_cache || !attn.q_offsets ||
      !attn.q_pos0)
    return "a null pointer";
  if (rope.k_cache != attn.k_cache || rope.v_cache != attn.v_cache) return "QKV-RoPE and attention on different caches";
  if (reinterpret_cast<uintptr_t>(attn.k_cache) % 16 != 0 || reinterpret_cast<uintptr_t>(attn.v_cache) % 16 != 0)
    return "caches not 16-byte aligned";
  return "";
}

bool FusedDecodeClustersFit(int num_splits) {
  if (num_splits < 1 || num_splits > kMaxSplits) return false;
  static std::mutex mu;
  static std::map<std::pair<int, int>, bool> fits;  // (device, splits)
  const std::pair<int, int> key{CurrentDevice(), num_splits};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = fits.find(key); it != fits.end()) return it->second;
  constexpr int kSmem = static_cast<int>(sizeof(Smem));
  bool ok = SetSmemLimitOnThisDevice<FusedDecodeKernel>(kSmem) == cudaSuccess;
  if (ok) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(1, num_splits, 1);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmem;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1;
    attr.val.clusterDim.y = num_splits;
    attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    ok = cudaOccupancyMaxActiveClusters(&clusters, FusedDecodeKernel, &cfg) == cudaSuccess && clusters > 0;
    if (!ok) cudaGetLastError();
  }
  fits.emplace(key, ok);
  return ok;
}

int FusedDecodeSplits(int num_seqs, int num_kv_heads, int num_sms) {
  return std::clamp(std::max(1, num_sms) / std::max(1, num_seqs * num_kv_heads), 1, kMaxSplits);
}

std::string LaunchFusedDecode(const QkvRopeParams& rope, const AttentionParams& attn, int num_splits,
                              cudaStream_t stream) {
  if (std::string why = FusedDecodeRefusal(rope, attn); !why.empty()) return "fused decode: cannot serve " + why;
  if (num_splits < 1 || num_splits > kMaxSplits)
    return "fused decode: num_splits must be in [1, " + std::to_string(kMaxSplits) + "], got " +
           std::to_string(num_splits);
  FusedParams p{};
  p.qkv = rope.qkv;
  p.qkv_width = (rope.num_heads + rope.num_kv_heads * (rope.k_eq_v ? 1 : 2)) * kD;
  p.q_norm = rope.q_norm;
  p.k_norm = rope.k_norm;
  p.kv_rows = rope.kv_rows;
  p.rope_pairs = rope.rope_pairs;
  p.rope_theta = rope.rope_theta;
  p.eps = rope.eps;
  p.k_cache = static_cast<__nv_bfloat16*>(const_cast<void*>(attn.k_cache));
  p.v_cache = static_cast<__nv_bfloat16*>(const_cast<void*>(attn.v_cache));
  p.out = attn.out;
  p.q_offsets = attn.q_offsets;
  p.q_pos0 = attn.q_pos0;
  p.block_tables = attn.block_tables;
  p.table_offsets = attn.table_offsets;
  int shift = 0;
  while ((1 << shift) < attn.block_size) ++shift;
  p.block_shift = shift;
  p.num_heads = attn.num_heads;
  p.num_kv_heads = attn.num_kv_heads;
  p.group = attn.num_heads / attn.num_kv_heads;
  p.window = attn.window;
  p.v_head0 = rope.num_heads + (rope.k_eq_v ? 0 : rope.num_kv_heads);
  p.scale_log2 = attn.scale * 1.4426950408889634f;

  constexpr int kSmem = static_cast<int>(sizeof(Smem));
  if (cudaError_t err = SetSmemLimitOnThisDevice<FusedDecodeKernel>(kSmem); err != cudaSuccess)
    return std::string("fused decode: cannot set shared memory: ") + cudaGetErrorString(err);
  if (cudaError_t err = LaunchWithPdlInClusters(FusedDecodeKernel, dim3(attn.num_kv_heads, num_splits, attn.num_seqs),
                                                dim3(kThreads), dim3(1, num_splits, 1), kSmem, stream, p);
      err != cudaSuccess)
    return std::string("fused decode: launch failed: ") + cudaGetErrorString(err);
  return LaunchError("fused decode");
}

}  // namespace gemma::kernels
