#include "engine/cuda/head_dim_check.h"

#include "absl/strings/str_cat.h"

namespace gemma::cuda {

absl::Status CheckHeadDims(const ModelConfig& config) {
  constexpr int kMaxHeadDim = 512;  // the largest attention instance
  for (const LayerSpec& s : config.layers) {
    if (s.head_dim > 0 && s.head_dim % 16 == 0 && s.head_dim <= kMaxHeadDim) continue;
    return absl::InvalidArgumentError(absl::StrCat("cuda: ", s.is_global() ? "global_head_dim" : "head_dim", "=",
                                                   s.head_dim, " is not supported: the CUDA kernels need a multiple of 16 up to ",
                                                   kMaxHeadDim));
  }
  return absl::OkStatus();
}

}  // namespace gemma::cuda
