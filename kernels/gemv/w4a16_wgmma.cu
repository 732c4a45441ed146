// The W4A16 linear on Hopper's warpgroup MMA for 1..64 rows (sm_90a).
//
// Swap-AB, as the FP8 wgmma linear: the weight rows are the instruction's M
// side, the batch its N side (N = 8, 16, 32 or 64). A block is WG consumer
// warpgroups, each over 64 weight rows (warp w the 16-row tile 4 WG b + w of
// the tiled layout), and one producer warpgroup, over a range of the
// super-chunks (128 k each); a cluster of CL blocks splits K and sums its
// partials through distributed shared memory into rank 0, which stores (the
// same order every time). The consumers share the staged x: more of them
// per block read x from L2 fewer times (at N = 64 one warpgroup would read
// 3.5 bytes of x per byte of weights).
//
// Producers: every super-chunk's codes and scales (the consumer warps'
// 1024 + 128-byte blocks, 16-byte cp.async) and x into one of STAGES slots,
// completing on the slot's full barrier (cp.async.mbarrier.arrive.noinc, one
// arrival per producer thread); a slot is refilled once every consumer warp
// has arrived on its empty barrier. The copies are the producers' own: a
// consumer's proxy fence then waits for nothing in flight.
//
// Weights (A, registers): a consumer lane reads its 16 + 16 bytes of codes
// and the 16 bytes of its rows' scales from the slot. Its words are the
// m16n8k16 A fragments of the tile (kernels/quant/w4_layout.h), which are
// also wgmma's A fragments for the warp's 16 rows: a code pair becomes bf16
// (u - 8) exactly and is multiplied by the group's scale rounded to bf16
// (one more rounding than the mma.sync tilings, which scale fp32 partials).
//
// The layout orders a lane's k as elements 8t..8t+7 of each 32-group, so the
// MMA's k16 step (group q, half e) takes, in its k slots 2t + j and
// 8 + 2t + j, the elements 8t + 4e + j and 8t + 4e + 2 + j. x (B) is staged
// in that order by 4-byte cp.async: a producer warp copies 128 bytes of one
// row (64 k, two groups) per instruction and lane l (element pair l) writes
// word l % 4 of its 8-element piece l / 4 % 4 into the k16 step of its group
// and half, the K-major 128-byte-swizzled layout of SmemDescSw128 (two
// [N][128 B] halves per super-chunk, a k16 step +32 B; the 32 words of a row
// land in 32 different banks).
//
// Per super-chunk a consumer warpgroup issues two commit groups of four
// m64nNk16 (dequantizing the next four steps while the previous group
// runs); the A registers of a group stay untouched until the wait that
// follows the next group's issue, and a slot is released after the wait
// that completes its second group.
#include "kernels/gemv/w4a16_wgmma.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/smem_copy.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma_bf16.cuh"
#include "kernels/gemv/w4a16_common.cuh"

namespace gemma::kernels::w4 {
namespace {

template <int N, int WG, int STAGES>
struct WgmmaLayout {
  static constexpr int kConsumers = 128 * WG;
  static constexpr int kThreads = kConsumers + 128;      // and a producer warpgroup
  static constexpr int kXStageBytes = N * 256;            // two [N][128 B] halves
  static constexpr int kCodeWarpBytes = 1024 + 128;       // a tile's codes and scales of one super-chunk
  // x first, on a swizzle atom: slots are whole KB.
  static constexpr int kStageBytes = (kXStageBytes + 4 * WG * kCodeWarpBytes + 1023) / 1024 * 1024;
  static constexpr int kSmemBytes = 1024 + STAGES * kStageBytes;              // 1024: aligning
  static_assert(N % 8 == 0 && N <= 64 && (N & (N - 1)) == 0, "wgmma N of 8, 16, 32 or 64");
  static_assert(STAGES >= 2, "a slot fills while another is read");
  static_assert(kStageBytes * STAGES >= kConsumers * N / 2 * 4, "the cluster sum reuses the slots");
  static_assert(kSmemBytes <= 227 * 1024, "a block's shared memory");
};

// 4-byte copy, zero-filled when !valid.
__device__ __forceinline__ void CpAsync4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0)
               : "memory");
}

// Keeps the compiler from reusing the registers of an asynchronous wgmma's A
// operand before the wait that completes it.
__device__ __forceinline__ void KeepRegs(uint32_t (&a)[4][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[s][i])::"memory");
}

__device__ __forceinline__ uint32_t MulBf16x2(uint32_t v, __nv_bfloat162 s) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&v), s);
  return *reinterpret_cast<const uint32_t*>(&r);
}

template <int N, int WG, int CL, int STAGES, int NA>
__global__ void __launch_bounds__(128 * WG + 128, 1) GemvW4WgmmaKernel(const __grid_constant__ GemvW4Params p) {
  using L = WgmmaLayout<N, WG, STAGES>;
  __shared__ __align__(8) uint64_t full_bar[STAGES];
  __shared__ __align__(8) uint64_t empty_bar[STAGES];
  extern __shared__ __align__(128) uint8_t smem_raw[];
  const uint32_t raw = SmemAddr(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;  // slot s at base + s * kStageBytes: x, then the code blocks
  uint8_t* const base_ptr = smem_raw + (base - raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rank = CL > 1 ? static_cast<int>(blockIdx.x % CL) : 0;
  const int supers = W4PaddedK(p.k) / 128;
  const int beg = supers * rank / CL, end = supers * (rank + 1) / CL;
  const int tiles = (p.n + 15) / 16;
  const int first_tile = static_cast<int>(blockIdx.x / CL) * 4 * WG;
  auto slot = [&](int c) { return base + static_cast<uint32_t>(((c - beg) % STAGES) * L::kStageBytes); };
  auto parity = [&](int c) { return static_cast<uint32_t>(((c - beg) / STAGES) & 1); };

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      MbarInit(SmemAddr(&full_bar[s]), 128);
      MbarInit(SmemAddr(&empty_bar[s]), 4 * WG);
    }
  }
  __syncthreads();

  float acc[NA][N / 2];  // NA independent chains: k16 step s of a super-chunk into chain s % NA
#pragma unroll
  for (int j = 0; j < NA; ++j)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[j][i] = 0.0f;
  if (warp >= 4 * WG) {  // producers
    const int pt = tid - L::kConsumers, pw = pt >> 5;
    auto issue_codes = [&](int c) {
      const uint32_t codes = slot(c) + L::kXStageBytes;
      for (int i = pt; i < 4 * WG * 72; i += 128) {  // 64 chunks of codes, then 8 of scales, per tile
        const int wt = i / 72, j = i - wt * 72;
        const int tile = min(first_tile + wt, tiles - 1);  // past n: never stored
        const uint4* src = j < 64 ? reinterpret_cast<const uint4*>(p.w) + (static_cast<size_t>(tile) * supers + c) * 64 + j
                                  : reinterpret_cast<const uint4*>(p.scales) + (static_cast<size_t>(tile) * supers + c) * 8 + (j - 64);
        CpAsync16(codes + static_cast<uint32_t>(wt * L::kCodeWarpBytes + 16 * j), src, true);
      }
    };
    // Lane l's element pair of a 64-k row half: group l / 16 of the half,
    // piece l / 4 % 4 of the group, word l % 4 of the piece -> k16 step
    // 2 (l / 16) + (l % 4) / 2, byte 16 (l % 2) + 4 (l / 4 % 4) of the step's 32.
    const uint32_t lane_chunk = static_cast<uint32_t>(4 * (lane >> 4) + (lane & 3));
    const uint32_t lane_byte = static_cast<uint32_t>(4 * ((lane >> 2) & 3));
    auto issue_x = [&](int c) {  // rows past the batch or k: zeros (padding codes have scale 0)
      const uint32_t stage = slot(c);
#pragma unroll 4
      for (int task = pw; task < 2 * N; task += 4) {  // (row b, half hk) of the super-chunk
        const int b = task >> 1, hk = task & 1;
        const int col = 128 * c + 64 * hk + 2 * lane;
        const bool ok = b < p.batch && col < p.k;
        const __nv_bfloat16* src = ok ? p.x + static_cast<size_t>(b) * p.k + col : p.x;
        CpAsync4(stage + static_cast<uint32_t>(hk * (N * 128) + b * 128) +
                     16 * (lane_chunk ^ static_cast<uint32_t>(b & 7)) + lane_byte,
                 src, ok);
      }
    };
    const int pre = min(STAGES, end - beg);
    for (int i = 0; i < pre; ++i) issue_codes(beg + i);  // weights do not depend on the previous kernel
    WaitForPreviousKernel();
    AllowDependentLaunch();
    for (int c = beg; c < end; ++c) {
      if (c >= beg + pre) {
        MbarWait(SmemAddr(&empty_bar[(c - beg) % STAGES]), parity(c) ^ 1u);
        issue_codes(c);
      }
      issue_x(c);
      CpAsyncMbarArrive(SmemAddr(&full_bar[(c - beg) % STAGES]));
    }
    CpAsyncWait<0>();
  } else {  // consumers
    WaitForPreviousKernel();  // before the stores (the previous kernel may read the output)
    AllowDependentLaunch();
    const int g = lane >> 2;
    // k16 step (group q, half e) of the warp's 16 rows: rows g (word q of the
    // first 16 bytes) and g + 8 (of the second), each scaled by its row's scale.
    auto dequant = [](uint32_t (&a)[4], const uint4 (&wv)[2], const uint4& sv, int q, int e) {
      const uint32_t aw = (&wv[0].x)[q], bw = (&wv[1].x)[q];
      const uint32_t* sw = &sv.x;
      const __nv_bfloat16 sa = __float2bfloat16(HalfBits(sw[q / 2] >> (16 * (q % 2))));
      const __nv_bfloat16 sb = __float2bfloat16(HalfBits(sw[2 + q / 2] >> (16 * (q % 2))));
      const __nv_bfloat162 s2a(sa, sa), s2b(sb, sb);
      a[0] = MulBf16x2(CodePairToBf16x2(aw, 2 * e), s2a);
      a[1] = MulBf16x2(CodePairToBf16x2(bw, 2 * e), s2b);
      a[2] = MulBf16x2(CodePairToBf16x2(aw, 2 * e + 1), s2a);
      a[3] = MulBf16x2(CodePairToBf16x2(bw, 2 * e + 1), s2b);
    };
    uint32_t a[2][4][4] = {};
    for (int c = beg; c < end; ++c) {
      MbarWait(SmemAddr(&full_bar[(c - beg) % STAGES]), parity(c));
      FenceProxyAsyncShared();  // the producers' x copies, seen through the barrier, before the wgmma reads
      const uint32_t stage = slot(c);
      const uint4* codes = reinterpret_cast<const uint4*>(base_ptr + (stage - base) + L::kXStageBytes +
                                                          warp * L::kCodeWarpBytes);
      const uint4 wv[2] = {codes[lane], codes[32 + lane]};
      const uint4 sv = codes[64 + g];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
        for (int s = 0; s < 4; ++s) dequant(a[hh][s], wv, sv, 2 * hh + s / 2, s % 2);
        WgmmaFence();
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          WgmmaBf16RSK<N>(acc[(4 * hh + s) % NA], a[hh][s],
                          SmemDescSw128(stage + static_cast<uint32_t>(hh * (N * 128) + 32 * s)), 1);
        }
        WgmmaCommit();
        WgmmaWait<1>();  // the previous group is complete
        KeepRegs(a[hh ^ 1]);
        // After half 0 the previous super-chunk's MMAs are all done: its slot is free.
        if (hh == 0 && c > beg && lane == 0) MbarArrive(SmemAddr(&empty_bar[(c - 1 - beg) % STAGES]));
      }
    }
    WgmmaWait<0>();
    KeepRegs(a[0]);
    KeepRegs(a[1]);
#pragma unroll
    for (int j = 0; j < NA; ++j) FenceRegs(acc[j]);
#pragma unroll
    for (int j = 1; j < NA; ++j)
#pragma unroll
      for (int i = 0; i < N / 2; ++i) acc[0][i] += acc[j][i];
  }

  if constexpr (CL > 1) {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    __syncthreads();  // every MMA is done reading the slots, every copy has landed: they hold the partials
    float* red = reinterpret_cast<float*>(base_ptr);
    if (rank != 0 && tid < L::kConsumers) {
#pragma unroll
      for (int i = 0; i < N / 2; ++i) red[i * L::kConsumers + tid] = acc[0][i];
    }
    cluster.sync();
    if (rank == 0 && tid < L::kConsumers) {
      for (int r = 1; r < CL; ++r) {
        const float* other = cluster.map_shared_rank(red, r);
#pragma unroll
        for (int i = 0; i < N / 2; ++i) acc[0][i] += other[i * L::kConsumers + tid];
      }
    }
    cluster.sync();  // the other ranks' shared memory stays until rank 0 has read it
    if (rank != 0) return;
  }
  if (tid < L::kConsumers) {
    StoreTiles<1, N / 8>(p, reinterpret_cast<const float(&)[1][N / 8][4]>(acc[0]), first_tile + warp, lane >> 2,
                         lane & 3);
  }
}

template <int N, int WG, int CL, int STAGES, int NA>
void LaunchWgmma(const GemvW4Params& p, cudaStream_t stream) {
  constexpr auto kernel = GemvW4WgmmaKernel<N, WG, CL, STAGES, NA>;
  constexpr int kSmem = WgmmaLayout<N, WG, STAGES>::kSmemBytes;
  // Above 48 KB needs the opt-in; a failed one shows as the launch's error.
  SetSmemLimitOnThisDevice<kernel>(kSmem);
  const int row_blocks = ((p.n + 15) / 16 + 4 * WG - 1) / (4 * WG);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(row_blocks * CL);
  cfg.blockDim = dim3(WgmmaLayout<N, WG, STAGES>::kThreads);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = CL;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = CL > 1 ? 2 : 1;
  cudaLaunchKernelEx(&cfg, kernel, p);
}

// wg-n<n8 x tiles>g<consumer warpgroups per block>c<blocks of a cluster
// splitting K>s<stages>a<accumulator chains>.
constexpr WgmmaTiling kWgmmaTilings[] = {
    {"wg-n1g1c1s8a4", 1, LaunchWgmma<8, 1, 1, 8, 4>},   {"wg-n1g1c2s8a4", 1, LaunchWgmma<8, 1, 2, 8, 4>},
    {"wg-n1g1c4s8a4", 1, LaunchWgmma<8, 1, 4, 8, 4>},   {"wg-n1g2c1s8a4", 1, LaunchWgmma<8, 2, 1, 8, 4>},
    {"wg-n1g2c2s8a4", 1, LaunchWgmma<8, 2, 2, 8, 4>},   {"wg-n2g1c1s8a4", 2, LaunchWgmma<16, 1, 1, 8, 4>},
    {"wg-n2g1c2s8a4", 2, LaunchWgmma<16, 1, 2, 8, 4>},  {"wg-n2g1c4s8a4", 2, LaunchWgmma<16, 1, 4, 8, 4>},
    {"wg-n2g2c2s6a4", 2, LaunchWgmma<16, 2, 2, 6, 4>},  {"wg-n4g2c1s6a2", 4, LaunchWgmma<32, 2, 1, 6, 2>},
    {"wg-n4g2c2s6a2", 4, LaunchWgmma<32, 2, 2, 6, 2>},  {"wg-n4g2c4s6a2", 4, LaunchWgmma<32, 2, 4, 6, 2>},
    {"wg-n4g1c4s8a4", 4, LaunchWgmma<32, 1, 4, 8, 4>},  {"wg-n4g2c2s6a4", 4, LaunchWgmma<32, 2, 2, 6, 4>},
    {"wg-n8g2c1s6a2", 8, LaunchWgmma<64, 2, 1, 6, 2>},  {"wg-n8g2c2s6a2", 8, LaunchWgmma<64, 2, 2, 6, 2>},
    {"wg-n8g2c4s6a2", 8, LaunchWgmma<64, 2, 4, 6, 2>},  {"wg-n8g3c2s5a1", 8, LaunchWgmma<64, 3, 2, 5, 1>},
    {"wg-n8g3c4s5a1", 8, LaunchWgmma<64, 3, 4, 5, 1>},  {"wg-n8g2c2s6a1", 8, LaunchWgmma<64, 2, 2, 6, 1>},
    {"wg-n1g1c2s8a1", 1, LaunchWgmma<8, 1, 2, 8, 1>},
};

}  // namespace

const WgmmaTiling* WgmmaTilings(int* count) {
  if (count != nullptr) *count = static_cast<int>(sizeof(kWgmmaTilings) / sizeof(kWgmmaTilings[0]));
  return kWgmmaTilings;
}

}  // namespace gemma::kernels::w4
