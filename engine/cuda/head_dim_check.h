// The head_dims the CUDA kernels run: every layer's (head_dim on sliding
// layers, global_head_dim on global ones) a multiple of 16 up to 512 (the
// attention tiles read 16-dim MMA steps; kernels/attention/attention.h).
#pragma once

#include "absl/status/status.h"
#include "engine/model/config.h"

namespace gemma::cuda {

// OK, or InvalidArgument naming the config field and its value, e.g.
// "cuda: head_dim=40 is not supported: the CUDA kernels need a multiple of 16 up to 512".
absl::Status CheckHeadDims(const ModelConfig& config);

}  // namespace gemma::cuda
