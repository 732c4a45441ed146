#include "engine/parallel/shard_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gemma::parallel {
namespace {

// The r-th of `size` balanced contiguous parts of [0, n).
Range Part(int64_t n, int size, int r) {
  const int64_t base = n / size, extra = n % size;
  return {r * base + std::min<int64_t>(r, extra), base + (r < extra ? 1 : 0)};
}

// The KV heads rank r holds in a layer, given its query heads: its own share
// of the layer's KV heads, or the one head all its query heads read.
absl::StatusOr<Range> KvHeads(const ModelConfig& config, int layer, int size, int r, const Range& q_heads) {
  const int num_kv = config.layers[layer].num_kv_heads;
  if (num_kv <= 0 || config.num_heads % num_kv != 0)
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, ": ", config.num_heads,
                                                   " attention heads do not group over ", num_kv, " KV heads"));
  if (num_kv % size == 0) {
    const int64_t per = num_kv / size;
    return Range{r * per, per};
  }
  if (size % num_kv == 0) {
    const int64_t group = config.num_heads / num_kv;
    return Range{q_heads.begin / group, 1};  // replicated over size / num_kv ranks
  }
  return absl::InvalidArgumentError(absl::StrCat("tensor_parallel_size ", size, ": layer ", layer, "'s ", num_kv,
                                                 " KV heads neither divide by it nor divide it"));
}

}  // namespace

absl::Status CheckTensorParallelSize(int size) {
  if (size == 1 || size == 2 || size == 4) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--tensor-parallel-size must be 1, 2 or 4, got ", size));
}

absl::StatusOr<ShardPlan> MakeShardPlan(const ModelConfig& config, int size) {
  if (size < 1) return absl::InvalidArgumentError(absl::StrCat("tensor_parallel_size must be >= 1, got ", size));
  if (config.num_heads % size != 0)
    return absl::InvalidArgumentError(absl::StrCat("tensor_parallel_size ", size, " does not divide num_attention_heads ",
                                                   config.num_heads));
  if (config.intermediate_size % size != 0)
    return absl::InvalidArgumentError(absl::StrCat("tensor_parallel_size ", size, " does not divide intermediate_size ",
                                                   config.intermediate_size));
  if (config.vocab_size < size)
    return absl::InvalidArgumentError(absl::StrCat("tensor_parallel_size ", size, " exceeds vocab_size ",
                                                   config.vocab_size));
  ShardPlan plan;
  plan.size = size;
  const int64_t heads_per_rank = config.num_heads / size;
  for (int r = 0; r < size; ++r) {
    RankShard shard;
    shard.rank = r;
    shard.intermediate = Part(config.intermediate_size, size, r);
    shard.vocab = Part(config.vocab_size, size, r);
    for (int l = 0; l < config.num_layers; ++l) {
      LayerShard layer;
      layer.q_heads = {r * heads_per_rank, heads_per_rank};
      absl::StatusOr<Range> kv = KvHeads(config, l, size, r, layer.q_heads);
      if (!kv.ok()) return kv.status();
      layer.kv_heads = *kv;
      shard.layers.push_back(layer);
    }
    plan.ranks.push_back(std::move(shard));
  }
  return plan;
}

}  // namespace gemma::parallel
