#include "kernels/elementwise/elementwise.h"

#include "kernels/common/bf16_vec.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/pdl.cuh"
#include "kernels/quant/fp8_row.cuh"

namespace gemma::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void EmbeddingKernel(const __grid_constant__ EmbeddingParams p) {
  const int t = blockIdx.x;
  int id = p.token_ids[t];
  if (id < 0 || id >= p.vocab) id = 0;
  const uint4* row = reinterpret_cast<const uint4*>(p.table + static_cast<size_t>(id) * p.hidden);
  float4* out = reinterpret_cast<float4*>(p.out + static_cast<size_t>(t) * p.hidden);
  for (int v = threadIdx.x; v < p.hidden / 8; v += blockDim.x) {
    float f[8];
    Unpack8(__ldg(row + v), f);
    out[2 * v] = make_float4(f[0] * p.scale, f[1] * p.scale, f[2] * p.scale, f[3] * p.scale);
    out[2 * v + 1] = make_float4(f[4] * p.scale, f[5] * p.scale, f[6] * p.scale, f[7] * p.scale);
  }
}

__device__ __forceinline__ float GeluTanh(float x) {
  const float kAlpha = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(kAlpha * (x + 0.044715f * x * x * x)));
}

// gelu_tanh(gate) * up of 8 values: vector v of token t's row, scaled first
// where the input is an FP8 GEMM's unscaled sums (GeluGateParams).
__device__ __forceinline__ uint4 GeluGate8(const GeluGateParams& p, int64_t t, int v, const uint4& gate,
                                           const uint4& up) {
  float g[8], u[8], o[8];
  Unpack8(gate, g);
  Unpack8(up, u);
  if (p.in_col_scale != nullptr) {
    const float ts = __ldg(p.in_token_scale + t);
    float gs[8], us[8];
    Load8(p.in_col_scale + 8 * v, gs);
    Load8(p.in_col_scale + p.inter + 8 * v, us);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      g[j] *= gs[j] * ts;
      u[j] *= us[j] * ts;
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) o[j] = GeluTanh(g[j]) * u[j];
  return Pack8(o);
}

__global__ void GeluGateKernel(const __grid_constant__ GeluGateParams p) {
  WaitForPreviousKernel();
  AllowDependentLaunch();  // the down projection may prefetch its weights meanwhile
  const int vecs = p.inter / 8;
  const int64_t total = static_cast<int64_t>(p.num_tokens) * vecs;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / vecs, v = i % vecs;
    const uint4* row = reinterpret_cast<const uint4*>(p.in + t * 2 * p.inter);
    reinterpret_cast<uint4*>(p.out + t * p.inter)[v] = GeluGate8(p, t, static_cast<int>(v), row[v], row[vecs + v]);
  }
}

// One block per token row (the row's amax needs the whole row); each thread
// keeps its <= kGeluFp8Vecs outputs in registers for the second pass, and
// issues all its loads before any math.
constexpr int kGeluFp8Threads = 1024;
constexpr int kGeluFp8Vecs = 4;  // inter <= 8 * 1024 * 4 = 32768
__global__ void __launch_bounds__(kGeluFp8Threads) GeluGateFp8Kernel(const __grid_constant__ GeluGateParams p) {
  WaitForPreviousKernel();
  AllowDependentLaunch();  // the down projection may prefetch its weights meanwhile
  __shared__ float scratch[32];
  const int vecs = p.inter / 8;
  const int64_t t = blockIdx.x;
  const uint4* row = reinterpret_cast<const uint4*>(p.in + t * 2 * p.inter);
  uint4* out = reinterpret_cast<uint4*>(p.out + t * p.inter);
  uint4 gate[kGeluFp8Vecs], up[kGeluFp8Vecs];
#pragma unroll
  for (int i = 0; i < kGeluFp8Vecs; ++i) {
    const int v = threadIdx.x + i * kGeluFp8Threads;
    if (v < vecs) {
      gate[i] = row[v];
      up[i] = row[vecs + v];
    }
  }
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kGeluFp8Vecs; ++i) {
    const int v = threadIdx.x + i * kGeluFp8Threads;
    if (v < vecs) {
      gate[i] = GeluGate8(p, t, v, gate[i], up[i]);  // gate[] now holds the outputs
      out[v] = gate[i];
      amax = fmaxf(amax, AbsMax8(gate[i]));
    }
  }
  const float scale = Fp8RowScale(BlockMax(amax, scratch));
  const float inv = 1.0f / scale;
  if (threadIdx.x == 0) p.out_scale[t] = scale;
  uint2* out_fp8 = reinterpret_cast<uint2*>(p.out_fp8 + t * p.inter);
#pragma unroll
  for (int i = 0; i < kGeluFp8Vecs; ++i) {
    const int v = threadIdx.x + i * kGeluFp8Threads;
    if (v < vecs) out_fp8[v] = QuantizeE4M3x8(gate[i], inv);
  }
}

__global__ void GatherRowsKernel(const __grid_constant__ GatherRowsParams p) {
  AllowDependentLaunch();  // the lm_head GEMV may prefetch its weights meanwhile
  const int r = blockIdx.x;
  const uint4* src = reinterpret_cast<const uint4*>(p.src + static_cast<size_t>(p.rows[r]) * p.width);
  uint4* dst = reinterpret_cast<uint4*>(p.dst + static_cast<size_t>(r) * p.width);
  for (int v = threadIdx.x; v < p.width / 8; v += blockDim.x) dst[v] = src[v];
}

__global__ void SoftcapKernel(const __grid_constant__ SoftcapParams p) {
  const float inv = 1.0f / p.cap;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p.x[i] = p.cap * tanhf(p.x[i] * inv);
  }
}

__global__ void PdlStandInKernel() {
  WaitForPreviousKernel();
  AllowDependentLaunch();
}

__global__ void LateCopyKernel(const __grid_constant__ LateCopyParams p) {
  AllowDependentLaunch();
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < static_cast<uint64_t>(p.delay_ns));
  for (int c = 0; c < p.count; ++c) {
    auto* dst = static_cast<uint8_t*>(p.copies[c].dst);
    const auto* src = static_cast<const uint8_t*>(p.copies[c].src);
    for (size_t i = threadIdx.x; i < p.copies[c].bytes; i += blockDim.x) dst[i] = src[i];
  }
}

int GridFor(int64_t work) {
  int64_t blocks = (work + kThreads - 1) / kThreads;
  if (blocks > 4096) blocks = 4096;
  return static_cast<int>(blocks < 1 ? 1 : blocks);
}

}  // namespace

std::string LaunchEmbedding(const EmbeddingParams& p, cudaStream_t stream) {
  if (!p.token_ids || !p.table || !p.out) return "embedding: null pointer";
  if (p.num_tokens <= 0 || p.vocab <= 0 || p.hidden <= 0 || p.hidden % 8 != 0)
    return "embedding: bad shape (hidden must be a positive multiple of 8)";
  EmbeddingKernel<<<p.num_tokens, kThreads, 0, stream>>>(p);
  return LaunchError("embedding");
}

std::string LaunchGeluGate(const GeluGateParams& p, cudaStream_t stream) {
  if (!p.in || !p.out) return "gelu_gate: null pointer";
  if (p.num_tokens <= 0 || p.inter <= 0 || p.inter % 8 != 0)
    return "gelu_gate: bad shape (inter must be a positive multiple of 8)";
  if ((p.in_col_scale == nullptr) != (p.in_token_scale == nullptr)) {
    return "gelu_gate: give in_col_scale and in_token_scale together";
  }
  if (p.in_col_scale != nullptr && reinterpret_cast<uintptr_t>(p.in_col_scale) % 16 != 0) {
    return "gelu_gate: in_col_scale must be 16-byte aligned";
  }
  if (p.out_fp8) {
    if (!p.out_scale) return "gelu_gate: out_fp8 without out_scale";
    if (p.inter > 8 * kGeluFp8Threads * kGeluFp8Vecs) return "gelu_gate: out_fp8 supports inter up to 32768";
    LaunchWithPdl(GeluGateFp8Kernel, dim3(p.num_tokens), dim3(kGeluFp8Threads), 0, stream, p);
    return LaunchError("gelu_gate");
  }
  LaunchWithPdl(GeluGateKernel, dim3(GridFor(static_cast<int64_t>(p.num_tokens) * p.inter / 8)), dim3(kThreads), 0,
                stream, p);
  return LaunchError("gelu_gate");
}

std::string LaunchGatherRows(const GatherRowsParams& p, cudaStream_t stream) {
  if (!p.src || !p.rows || !p.dst) return "gather_rows: null pointer";
  if (p.num_rows <= 0 || p.width <= 0 || p.width % 8 != 0) return "gather_rows: bad shape";
  GatherRowsKernel<<<p.num_rows, kThreads, 0, stream>>>(p);
  return LaunchError("gather_rows");
}

std::string LaunchSoftcap(const SoftcapParams& p, cudaStream_t stream) {
  if (!p.x || p.count <= 0 || !(p.cap > 0.0f)) return "softcap: bad arguments";
  SoftcapKernel<<<GridFor(p.count), kThreads, 0, stream>>>(p);
  return LaunchError("softcap");
}

std::string LaunchLateCopy(const LateCopyParams& p, cudaStream_t stream) {
  if (p.count < 0 || p.count > kMaxLateCopies) return "late_copy: count must be in [0, 16]";
  if (p.delay_ns < 0) return "late_copy: delay_ns must be >= 0";
  for (int c = 0; c < p.count; ++c) {
    if (p.copies[c].bytes > 0 && (!p.copies[c].dst || !p.copies[c].src)) return "late_copy: null pointer";
  }
  LateCopyKernel<<<1, kThreads, 0, stream>>>(p);
  return LaunchError("late_copy");
}

std::string LaunchPdlStandIn(cudaStream_t stream) {
  LaunchWithPdl(PdlStandInKernel, dim3(1), dim3(32), 0, stream);
  return LaunchError("pdl_stand_in");
}

}  // namespace gemma::kernels
