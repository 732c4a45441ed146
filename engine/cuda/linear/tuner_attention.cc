// Tuner's prefill attention tiles: the kernels time their configurations
// (kernels/attention/attention.h, TimePrefillAttention); the choice per
// (head_dim, shape bucket) is kept here and in the autotune cache file.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/cuda/linear/tuner.h"
#include "kernels/attention/autotune.h"

namespace gemma::cuda {

absl::StatusOr<std::string> Tuner::PrefillAttentionTile(const kernels::AttentionParams& params,
                                                        cudaStream_t stream) {
  if (!switches_.autotune) return std::string();  // the fixed default tiles
  const std::string bucket = kernels::PrefillAttentionBucket(params);
  const auto key = std::make_pair(params.head_dim, bucket);
  if (auto it = choices_.prefill_attention.find(key); it != choices_.prefill_attention.end()) return it->second;
  auto& cache = kernels::attention::AutotuneCache::Get();
  const std::string cache_key = kernels::attention::AutotuneCache::Key("prefill", params.head_dim, bucket);
  std::optional<std::string> name = cache.Lookup(cache_key);
  if (!name) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess || capturing != cudaStreamCaptureStatusNone)
      return std::string();  // no timing inside a capture: the default, chosen later
    std::string best;
    if (std::string err = kernels::TimePrefillAttention(params, stream, &best); !err.empty())
      return absl::InternalError(err);
    if (!best.empty()) cache.Store(cache_key, best);
    name = best;
  }
  // A cached name this build cannot run over the cache's dtype (an older
  // build's choice) leaves the default.
  const std::vector<std::string> configs = kernels::PrefillAttentionConfigs(params.head_dim, params.kv_fp8);
  if (std::find(configs.begin(), configs.end(), *name) == configs.end()) name->clear();
  choices_.prefill_attention[key] = *name;
  return *name;
}

}  // namespace gemma::cuda
