// Decode launcher: split-K flash decoding. Grid (KV heads, splits, sequences)
// is fixed by the batch, so a captured graph replays at any depth; each block
// reads its sequence's length on the device and sweeps only its share of the
// live keys, for all heads of its KV group at once. A combine kernel merges the
// splits' partials (max, sum, unnormalized accumulator).
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels/attention/attention.h"
#include "kernels/attention/decode_default.h"
#include "kernels/attention/kernel_params.h"
#include "kernels/attention/launch_common.h"
#include "kernels/common/bf16_vec.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/pdl.cuh"

namespace gemma::kernels {
namespace {

constexpr int kMaxSplits = 256;
constexpr int kCombineThreads = 256;
static_assert(kCombineThreads >= kMaxSplits, "one split's weight per thread");

// A split block that had no keys to read (past the sequence's length; such
// blocks are the last splits) writes only its max (-inf) and sum (0). A
// split whose scores were NaN also has max -inf (fmaxf drops NaN) but a NaN
// sum: it counts as live and is read, so the NaN reaches the output.
__device__ __forceinline__ bool EmptySplit(float m, float l) { return m == -INFINITY && l == 0.f; }

// partial: [num_seqs, num_heads, num_splits, head_dim + 4] floats. One block
// per (head, sequence). Every warp finds, itself (lanes stride over the
// splits; no barrier), the splits' max, their weighted sum, and `live`: one
// past the last split that is not empty, so the empty ones at the end are
// never read (every split below it wrote its accumulator). Then the threads
// form groups of head_dim / 4 lanes (a float4 of the row each) and the groups
// take every `groups`-th live split, so the loads of many splits fly
// together; the groups' sums meet in shared memory.
__global__ void __launch_bounds__(kCombineThreads)
    CombineSplitsKernel(const float* partial, __nv_bfloat16* __restrict__ out,
                        const int* __restrict__ q_offsets, int num_heads, int head_dim, int num_splits) {
  __shared__ float weight[kMaxSplits];
  __shared__ float4 group_acc[kCombineThreads];
  // partial is not __restrict__: the split kernel writing it may still run
  // when this one starts, so its loads must stay after this wait.
  WaitForPreviousKernel();  // the splits' partials
  AllowDependentLaunch();   // the output projection may launch and prefetch its weights
  const int head = blockIdx.x, seq = blockIdx.y, tid = threadIdx.x, lane32 = tid & 31;
  const int token = q_offsets[seq];
  if (q_offsets[seq + 1] - token < 1) return;
  const int stride = head_dim + 4;
  const float* base = partial + (static_cast<int64_t>(seq) * num_heads + head) * num_splits * stride;
  float max_all = -INFINITY;
  int live = 0;
  for (int s = lane32; s < num_splits; s += 32) {
    const float m = base[s * stride + head_dim], l = base[s * stride + head_dim + 1];
    max_all = fmaxf(max_all, m);
    if (!EmptySplit(m, l)) live = s + 1;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    max_all = fmaxf(max_all, __shfl_xor_sync(0xffffffffu, max_all, o));
    live = max(live, __shfl_xor_sync(0xffffffffu, live, o));
  }
  auto weight_of = [&](float m) { return m == -INFINITY ? 0.f : exp2f(m - max_all); };
  float sum = 0.f;
  for (int s = lane32; s < live; s += 32) {
    sum += weight_of(base[s * stride + head_dim]) * base[s * stride + head_dim + 1];
  }
  sum = WarpSum(sum);
  const float inv_sum = sum > 0.f ? __frcp_rn(sum) : sum == 0.f ? 0.f : sum;  // NaN stays NaN
  if (tid < live) weight[tid] = weight_of(base[tid * stride + head_dim]);
  __syncthreads();

  const int lanes = head_dim / 4;  // head_dim is a multiple of 16, at most 512: 4..128 lanes
  const int groups = kCombineThreads / lanes;
  const int lane = tid % lanes, group = tid / lanes;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (group < groups) {
#pragma unroll 4
    for (int s = group; s < live; s += groups) {
      const float w = weight[s];
      const float4 x = *reinterpret_cast<const float4*>(base + s * stride + 4 * lane);
      acc.x += w * x.x, acc.y += w * x.y, acc.z += w * x.z, acc.w += w * x.w;
    }
  }
  group_acc[tid] = acc;
  __syncthreads();
  if (group != 0) return;
  for (int g = 1; g < groups; ++g) {
    const float4 x = group_acc[g * lanes + lane];
    acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
  }
  __nv_bfloat162* pair =
      reinterpret_cast<__nv_bfloat162*>(out + (static_cast<int64_t>(token) * num_heads + head) * head_dim + 4 * lane);
  pair[0] = __floats2bfloat162_rn(acc.x * inv_sum, acc.y * inv_sum);
  pair[1] = __floats2bfloat162_rn(acc.z * inv_sum, acc.w * inv_sum);
}

// Shared-memory limits, once per build and device (the limit belongs to a
// device's context). The launched build's only (a bf16 launch never depends
// on the E4M3 one).
std::string SetUpDecode(cudaError_t (*setup)()) {
  static std::mutex mu;
  static std::map<std::pair<int, cudaError_t (*)()>, std::string> results;
  std::lock_guard<std::mutex> lock(mu);
  const std::pair<int, cudaError_t (*)()> key{CurrentDevice(), setup};
  auto it = results.find(key);
  if (it != results.end()) return it->second;
  std::string error;
  if (cudaError_t err = setup(); err != cudaSuccess) {
    error = std::string("decode attention: cannot set shared memory: ") + cudaGetErrorString(err);
  }
  results.emplace(key, error);
  return error;
}

// The build of `e` that serves params: E4M3, keys from values
// (ServesKeysFromValues), or the plain bf16 one.
struct DecodeBuild {
  cudaError_t (*setup)();
  void (*launch)(const attention::KernelParams&, dim3, cudaStream_t);
  bool keys_from_values;
};
DecodeBuild PickBuild(const AttentionParams& params, const attention::KernelEntry& e) {
  if (params.kv_fp8) return {e.setup_fp8, e.launch_fp8, false};
  if (attention::ServesKeysFromValues(e, params)) return {e.setup_kfv, e.launch_kfv, true};
  return {e.setup, e.launch, false};
}

// The split kernel `e` (the build PickBuild chooses), then the merge.
// REQUIRES: params validated.
std::string LaunchDecode(const AttentionParams& params, const attention::KernelEntry& e, void* workspace,
                         int num_splits, cudaStream_t stream) {
  if (num_splits < 1 || num_splits > kMaxSplits)
    return "decode attention: num_splits must be in [1, " + std::to_string(kMaxSplits) +
           "], got " + std::to_string(num_splits);
  if (num_splits > 1 && workspace == nullptr)
    return "decode attention: num_splits > 1 needs a workspace of DecodeWorkspaceBytes()";
  const int group = params.num_heads / params.num_kv_heads;
  if (!attention::DecodeBuildServesGroup(e, group))
    return "decode attention: build " + e.name + " serves at most 8 query heads per KV head, got " +
           std::to_string(group);
  const DecodeBuild build = PickBuild(params, e);
  if (build.launch == nullptr || build.setup == nullptr)
    return "decode attention: build " + e.name + " has no " + (params.kv_fp8 ? "E4M3-cache" : "bf16-cache") +
           " build for head_dim " + std::to_string(params.head_dim) + " here";
  if (std::string err = SetUpDecode(build.setup); !err.empty()) return err;

  attention::KernelParams k = attention::ToKernelParams(params);
  k.heads_per_block = k.group;
  k.tokens_per_block = 1;
  k.num_splits = num_splits;
  k.partial = static_cast<float*>(workspace);
  k.pdl = true;
  if (build.keys_from_values) {
    k.kv_weight = params.keys_from_values;
    k.rope_pairs = params.rope_pairs;
  }
  build.launch(k, dim3(params.num_kv_heads, num_splits, params.num_seqs), stream);
  if (std::string err = attention::LastLaunchError("decode attention"); !err.empty()) return err;
  if (num_splits == 1) return "";
  LaunchWithPdl(CombineSplitsKernel, dim3(params.num_heads, params.num_seqs), dim3(kCombineThreads), 0, stream,
                static_cast<const float*>(k.partial), params.out, params.q_offsets, params.num_heads,
                params.head_dim, num_splits);
  return attention::LastLaunchError("decode attention combine");
}

}  // namespace

size_t DecodeWorkspaceBytes(int max_seqs, int num_heads, int head_dim, int num_splits) {
  if (max_seqs <= 0 || num_heads <= 0 || head_dim <= 0 || num_splits <= 1) return 0;
  return static_cast<size_t>(max_seqs) * num_heads * num_splits * (head_dim + 4) * sizeof(float);
}

int DecodeNumSplits(int num_seqs, int num_kv_heads, int num_sms, int blocks_per_sm) {
  // Rounded down: a second, partial wave would cost as much as the first.
  const int blocks = std::max(1, num_seqs) * std::max(1, num_kv_heads);
  // At most 64 splits per block slot of a multiprocessor, 128 in all.
  const int per_sm = std::max(1, blocks_per_sm);
  return std::clamp(std::max(1, num_sms) * per_sm / blocks, 1, std::min(64 * per_sm, 128));
}

int DecodeBlocksPerSm(int head_dim, bool kv_fp8, bool keys_from_values) {
  if (!kv_fp8) {
    const attention::KernelEntry* e = keys_from_values ? attention::KeysFromValuesDecodeDefault(head_dim) : nullptr;
    return e != nullptr ? std::max(1, e->bf16_blocks_per_sm) : 1;
  }
  // The split count for the 31B's groups (a larger group falls back to the
  // tile build, whose E4M3 blocks per multiprocessor differ: only speed).
  if (const attention::KernelEntry* e = attention::Fp8DecodeDefault(head_dim, 8)) return std::max(1, e->fp8_blocks_per_sm);
  const attention::KernelTable* own = attention::TableForHeadDim(head_dim);
  return own != nullptr ? std::max(1, own->decode.fp8_blocks_per_sm) : 1;
}

std::string LaunchDecodeAttention(const AttentionParams& params, void* workspace, int num_splits,
                                  cudaStream_t stream) {
  if (std::string err = attention::ValidateParams(params, true); !err.empty()) return err;
  if (params.kv_fp8) {
    const int group = params.num_heads / params.num_kv_heads;
    if (const attention::KernelEntry* e = attention::Fp8DecodeDefault(params.head_dim, group))
      return LaunchDecode(params, *e, workspace, num_splits, stream);
  } else if (const attention::KernelEntry* e = attention::KeysFromValuesDecodeDefault(params.head_dim);
             e != nullptr && attention::ServesKeysFromValues(*e, params)) {
    return LaunchDecode(params, *e, workspace, num_splits, stream);
  }
  // A head_dim without an instance of its own runs the next one's padded build.
  const attention::KernelTable* own = attention::TableForHeadDim(params.head_dim);
  const attention::KernelEntry& e =
      own != nullptr ? own->decode : attention::PaddedTableForHeadDim(params.head_dim)->padded;
  return LaunchDecode(params, e, workspace, num_splits, stream);
}

std::vector<std::string> DecodeVariants(int head_dim, bool kv_fp8) {
  std::vector<std::string> names;
  for (const attention::KernelEntry& e : attention::DecodeVariantTable(head_dim, kv_fp8)) names.push_back(e.name);
  return names;
}

std::string LaunchDecodeAttentionVariant(const AttentionParams& params, void* workspace, int num_splits, int variant,
                                         cudaStream_t stream) {
  if (std::string err = attention::ValidateParams(params, true); !err.empty()) return err;
  const auto& table = attention::DecodeVariantTable(params.head_dim, params.kv_fp8);
  if (variant < 0 || variant >= static_cast<int>(table.size()))
    return "decode attention: no " + std::string(params.kv_fp8 ? "E4M3" : "bf16") + "-cache variant " +
           std::to_string(variant) + " for head_dim " + std::to_string(params.head_dim);
  return LaunchDecode(params, table[static_cast<size_t>(variant)], workspace, num_splits, stream);
}

bool DecodeVariantServes(int head_dim, bool kv_fp8, int variant, bool keys_from_values) {
  const auto& table = attention::DecodeVariantTable(head_dim, kv_fp8);
  if (variant < 0 || variant >= static_cast<int>(table.size())) return false;
  const attention::KernelEntry& e = table[static_cast<size_t>(variant)];
  if (kv_fp8) return e.launch_fp8 != nullptr;
  return e.launch != nullptr || (keys_from_values && e.launch_kfv != nullptr);
}

int DecodeVariantBlocksPerSm(int head_dim, bool kv_fp8, int variant) {
  const auto& table = attention::DecodeVariantTable(head_dim, kv_fp8);
  if (variant < 0 || variant >= static_cast<int>(table.size())) return 1;
  const attention::KernelEntry& e = table[static_cast<size_t>(variant)];
  return kv_fp8 ? e.fp8_blocks_per_sm : e.bf16_blocks_per_sm;
}

}  // namespace gemma::kernels
