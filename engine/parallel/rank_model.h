// One tensor-parallel rank's model: the config of its shard (its query heads,
// KV heads and intermediate columns, as if the model were that narrow) and
// its slices of the checkpoint's tensors in host memory, so a one-GPU backend
// loads and runs it unchanged; only the all-reduces after o_proj and
// down_proj are added. The embedding (lookup and tied LM head) and the norms
// are whole on every rank.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/parallel/shard_plan.h"

namespace gemma::parallel {

// The rank's view of `config`: num_heads, each layer's num_kv_heads and
// intermediate_size are the shard's; everything else is the model's.
ModelConfig RankConfig(const ModelConfig& config, const RankShard& shard);

// The rank's tensors: q/k/v and gate/up rows (and their FP8 row scales),
// o_proj and down_proj columns, the rest whole; `model.weights` points into
// `file`, which owns the bytes.
struct RankModel {
  LoadedModel model;
  std::unique_ptr<SafetensorsFile> file;
};
absl::StatusOr<std::unique_ptr<RankModel>> ShardModel(const LoadedModel& full, const RankShard& shard);

}  // namespace gemma::parallel
