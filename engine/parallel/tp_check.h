// Whether a backend can run `--tensor-parallel-size N` on this model and
// machine: the refusals, each naming what does not fit, before anything is
// loaded onto a device.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "engine/model/config.h"

namespace gemma::parallel {

// N must be 1, 2 or 4; on the cuda backend N GPUs must be visible
// (`visible_gpus`; ignored for cpu, which simulates the ranks); the model's
// heads, KV heads and intermediate size must split N ways (MakeShardPlan).
absl::Status CheckTensorParallel(int size, const ModelConfig& config, std::string_view backend, int visible_gpus);

}  // namespace gemma::parallel
