// One tensor-parallel rank's slice of the CPU backend's fp32 weights
// (engine/parallel/shard_plan.h says which rows and columns a rank owns).
#pragma once

#include "engine/cpu/cpu_weights.h"
#include "engine/parallel/shard_plan.h"

namespace gemma::cpu {

// The weights rank `shard` holds: q/k/v rows of its heads, o_proj columns of
// its query heads, gate/up rows and down_proj columns of its intermediate
// run, embedding rows of its vocabulary run; norms and scalars copied.
ModelParams ShardWeights(const ModelParams& full, const ModelConfig& config, const parallel::RankShard& shard);

}  // namespace gemma::cpu
