#include "engine/parallel/tp_check.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/parallel/shard_plan.h"

namespace gemma::parallel {

absl::Status CheckTensorParallel(int size, const ModelConfig& config, std::string_view backend, int visible_gpus) {
  if (absl::Status s = CheckTensorParallelSize(size); !s.ok()) return s;
  if (backend == "cuda" && size > visible_gpus)
    return absl::FailedPreconditionError(absl::StrCat("--tensor-parallel-size ", size, " needs ", size,
                                                      " GPUs (one per rank); ", visible_gpus, " visible"));
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(config, size);
  if (!plan.ok())
    return absl::InvalidArgumentError(absl::StrCat("--tensor-parallel-size: ", plan.status().message()));
  return absl::OkStatus();
}

}  // namespace gemma::parallel
