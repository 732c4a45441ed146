#include "engine/parallel/tp_check.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/parallel/shard_plan.h"

namespace gemma::parallel {

absl::Status CheckTensorParallel(int size, const ModelConfig& config, std::string_view backend, int visible_gpus) {
  if (absl::Status s = CheckTensorParallelSize(size); !s.ok()) return s;
  // The rank slices are cut from float / FP8 tensors; packed int4 rows and
  // their group scales are not sliced.
  if (size > 1 && config.int4_checkpoint.has_value())
    return absl::InvalidArgumentError(absl::StrCat("--tensor-parallel-size ", size,
                                                   ": a compressed-tensors W4A16 checkpoint runs on one GPU "
                                                   "(its packed weights are not sharded)"));
  if (backend == "cuda" && size > visible_gpus)
    return absl::FailedPreconditionError(absl::StrCat("--tensor-parallel-size ", size, " needs ", size,
                                                      " GPUs (one per rank); ", visible_gpus, " visible"));
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(config, size);
  if (!plan.ok())
    return absl::InvalidArgumentError(absl::StrCat("--tensor-parallel-size: ", plan.status().message()));
  return absl::OkStatus();
}

}  // namespace gemma::parallel
