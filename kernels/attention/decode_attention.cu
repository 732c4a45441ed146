// Decode launcher: split-K flash decoding. Grid (KV heads, splits, sequences)
// is fixed by the batch, so a captured graph replays at any depth; each block
// reads its sequence's length on the device and sweeps only its share of the
// live keys, for all heads of its KV group at once. The last split block of a
// (sequence, KV head) merges the splits' partials (max, sum, unnormalized
// accumulator) in the same launch (split_combine.cuh).
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>

#include "kernels/attention/attention.h"
#include "kernels/attention/kernel_params.h"
#include "kernels/attention/launch_common.h"

namespace gemma::kernels {
namespace {

// Workspace layout (attention.h): partials first, counters at the end.
size_t PartialBytes(int num_seqs, int num_heads, int head_dim, int num_splits) {
  return static_cast<size_t>(num_seqs) * num_heads * num_splits * (head_dim + 4) * sizeof(float);
}
size_t CounterBytes(int num_seqs, int heads) {
  return (static_cast<size_t>(num_seqs) * heads * sizeof(int) + 15) / 16 * 16;
}

// Shared-memory limits, once per head_dim.
std::string SetUpDecode(int head_dim, const attention::KernelEntry& e) {
  static std::mutex mu;
  static std::map<int, std::string> results;
  std::lock_guard<std::mutex> lock(mu);
  auto it = results.find(head_dim);
  if (it != results.end()) return it->second;
  std::string error;
  if (cudaError_t err = e.setup(); err != cudaSuccess)
    error = std::string("decode attention: cannot set shared memory: ") + cudaGetErrorString(err);
  results.emplace(head_dim, error);
  return error;
}

}  // namespace

size_t DecodeWorkspaceBytes(int max_seqs, int num_heads, int head_dim, int num_splits) {
  if (max_seqs <= 0 || num_heads <= 0 || head_dim <= 0 || num_splits <= 1) return 0;
  // Counters for num_heads >= num_kv_heads of any layer: the region is the
  // same for every head_dim and split count of a workspace shared by layers.
  return PartialBytes(max_seqs, num_heads, head_dim, num_splits) + CounterBytes(max_seqs, num_heads);
}

int DecodeNumSplits(int num_seqs, int num_kv_heads, int num_sms) {
  // Rounded down: a second, partial wave would cost as much as the first.
  const int blocks = std::max(1, num_seqs) * std::max(1, num_kv_heads);
  return std::clamp(std::max(1, num_sms) / blocks, 1, 64);
}

std::string LaunchDecodeAttention(const AttentionParams& params, void* workspace,
                                  size_t workspace_bytes, int num_splits, cudaStream_t stream) {
  if (std::string err = attention::ValidateParams(params, true); !err.empty()) return err;
  if (num_splits < 1 || num_splits > attention::kMaxDecodeSplits)
    return "decode attention: num_splits must be in [1, " +
           std::to_string(attention::kMaxDecodeSplits) + "], got " + std::to_string(num_splits);
  const size_t partial_bytes =
      PartialBytes(params.num_seqs, params.num_heads, params.head_dim, num_splits);
  const size_t counter_bytes = static_cast<size_t>(params.num_seqs) * params.num_kv_heads * sizeof(int);
  if (num_splits > 1) {
    if (workspace == nullptr || partial_bytes + counter_bytes > workspace_bytes)
      return "decode attention: num_splits " + std::to_string(num_splits) + " needs a workspace of " +
             std::to_string(partial_bytes + counter_bytes) + " bytes (DecodeWorkspaceBytes), got " +
             std::to_string(workspace == nullptr ? 0 : workspace_bytes);
    if (reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
      return "decode attention: the workspace must be 16-byte aligned";
  }
  const attention::KernelEntry& e = attention::TableForHeadDim(params.head_dim)->decode;
  if (std::string err = SetUpDecode(params.head_dim, e); !err.empty()) return err;

  attention::KernelParams k = attention::ToKernelParams(params);
  k.heads_per_block = k.group;
  k.tokens_per_block = 1;
  k.num_splits = num_splits;
  if (num_splits > 1) {
    k.partial = static_cast<float*>(workspace);
    char* end = static_cast<char*>(workspace) + workspace_bytes / sizeof(int) * sizeof(int);
    k.counters = reinterpret_cast<int*>(end - counter_bytes);
  }
  e.launch(k, dim3(params.num_kv_heads, num_splits, params.num_seqs), stream);
  return attention::LastLaunchError("decode attention");
}

}  // namespace gemma::kernels
