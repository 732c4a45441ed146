#include "kernels/attention/kv_expand.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/common/launch.h"

namespace gemma::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSeq = 264;  // CUDA blocks sweeping one sequence's pages (two waves of 132)

// Sequence i's first block and block count.
__device__ __forceinline__ void SeqBlocks(const KvExpandParams& p, int i, int* first, int* count) {
  const int pos0 = p.q_pos0[i], end = pos0 + p.q_offsets[i + 1] - p.q_offsets[i];
  const int lo = p.window > 0 ? max(0, pos0 - p.window + 1) : 0;
  *first = lo / p.block_size;
  *count = end > 0 ? (end + p.block_size - 1) / p.block_size - *first : 0;
}

__device__ __forceinline__ uint32_t E4m3PairToBf16Pair(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);  // exact: E4M3 values are bf16 values
  uint32_t r;
  memcpy(&r, &b, 4);
  return r;
}

// Grid (kBlocksPerSeq, num_seqs): CUDA block x of sequence i widens pages
// x, x + gridDim.x, ... of it.
__global__ void __launch_bounds__(kThreads) KvExpandKernel(const KvExpandParams p) {
  const int i = blockIdx.y;
  int base = 0;
  for (int j = 0; j < i; ++j) {
    int f, n;
    SeqBlocks(p, j, &f, &n);
    base += n;
  }
  int first, count;
  SeqBlocks(p, i, &first, &count);
  const int* table = p.block_tables + p.table_offsets[i];
  int* out_table = p.tables_out + p.table_offsets[i];
  for (int e = blockIdx.x * kThreads + threadIdx.x; e < first; e += gridDim.x * kThreads) out_table[e] = -1;
  const int64_t row_elems = static_cast<int64_t>(p.num_kv_heads) * p.head_dim;
  const int64_t page_chunks = p.block_size * row_elems / 16;  // 16 codes per load
  for (int e = blockIdx.x; e < count; e += gridDim.x) {
    const int dst = base + e;
    if (dst >= p.out_blocks) return;  // the caller sized the scratch; never write past it
    const int src = table[first + e];
    if (threadIdx.x == 0) out_table[first + e] = dst;
    const int64_t src0 = static_cast<int64_t>(src) * p.block_size * row_elems;
    const int64_t dst0 = static_cast<int64_t>(dst) * p.block_size * row_elems;
    for (int64_t c = threadIdx.x; c < page_chunks; c += kThreads) {
      for (int kv = 0; kv < 2; ++kv) {
        const uint8_t* in = static_cast<const uint8_t*>(kv ? p.v_cache : p.k_cache) + src0 + 16 * c;
        __nv_bfloat16* out = (kv ? p.v_out : p.k_out) + dst0 + 16 * c;
        const uint4 codes = __ldg(reinterpret_cast<const uint4*>(in));
        const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
        uint4 lo, hi;
        lo.x = E4m3PairToBf16Pair(w[0]), lo.y = E4m3PairToBf16Pair(w[0] >> 16);
        lo.z = E4m3PairToBf16Pair(w[1]), lo.w = E4m3PairToBf16Pair(w[1] >> 16);
        hi.x = E4m3PairToBf16Pair(w[2]), hi.y = E4m3PairToBf16Pair(w[2] >> 16);
        hi.z = E4m3PairToBf16Pair(w[3]), hi.w = E4m3PairToBf16Pair(w[3] >> 16);
        reinterpret_cast<uint4*>(out)[0] = lo;
        reinterpret_cast<uint4*>(out)[1] = hi;
      }
    }
  }
}

}  // namespace

std::string LaunchKvExpand(const KvExpandParams& p, cudaStream_t stream) {
  if (!p.k_cache || !p.v_cache || !p.k_out || !p.v_out || !p.tables_out || !p.block_tables || !p.table_offsets ||
      !p.q_offsets || !p.q_pos0)
    return "kv expand: null pointer";
  if (p.num_seqs <= 0 || p.num_seqs > 65535)
    return "kv expand: num_seqs must be in [1, 65535], got " + std::to_string(p.num_seqs);
  if (p.block_size <= 0 || (p.block_size & (p.block_size - 1)) != 0)
    return "kv expand: block_size must be a power of two, got " + std::to_string(p.block_size);
  if (p.num_kv_heads <= 0 || p.head_dim <= 0 || p.head_dim % 16 != 0)
    return "kv expand: bad kv heads / head_dim (" + std::to_string(p.num_kv_heads) + ", " +
           std::to_string(p.head_dim) + ")";
  if (p.window < 0) return "kv expand: window must be >= 0, got " + std::to_string(p.window);
  if (p.out_blocks <= 0) return "kv expand: out_blocks must be positive, got " + std::to_string(p.out_blocks);
  KvExpandKernel<<<dim3(kBlocksPerSeq, p.num_seqs), kThreads, 0, stream>>>(p);
  return LaunchError("kv expand");
}

KvExpandParams KvExpandOf(const AttentionParams& paged, __nv_bfloat16* k_out, __nv_bfloat16* v_out, int* tables_out,
                          int out_blocks) {
  KvExpandParams e;
  e.k_cache = paged.k_cache;
  e.v_cache = paged.v_cache;
  e.k_out = k_out;
  e.v_out = v_out;
  e.tables_out = tables_out;
  e.block_tables = paged.block_tables;
  e.table_offsets = paged.table_offsets;
  e.q_offsets = paged.q_offsets;
  e.q_pos0 = paged.q_pos0;
  e.num_seqs = paged.num_seqs;
  e.block_size = paged.block_size;
  e.num_kv_heads = paged.num_kv_heads;
  e.head_dim = paged.head_dim;
  e.window = paged.window;
  e.out_blocks = out_blocks;
  return e;
}

AttentionParams WidenedView(const AttentionParams& paged, const KvExpandParams& expand) {
  AttentionParams w = paged;
  w.k_cache = expand.k_out;
  w.v_cache = expand.v_out;
  w.kv_fp8 = false;
  w.block_tables = expand.tables_out;
  w.num_blocks = expand.out_blocks;
  return w;
}

int64_t KvExpandBlocks(std::span<const int> q_pos0, std::span<const int> q_offsets, int block_size, int window) {
  int64_t blocks = 0;
  for (size_t i = 0; i < q_pos0.size() && i + 1 < q_offsets.size(); ++i) {
    const int64_t end = static_cast<int64_t>(q_pos0[i]) + q_offsets[i + 1] - q_offsets[i];
    if (end <= 0) continue;
    const int64_t lo = window > 0 ? std::max<int64_t>(0, q_pos0[i] - window + 1) : 0;
    blocks += (end + block_size - 1) / block_size - lo / block_size;
  }
  return blocks;
}

}  // namespace gemma::kernels
