// Internal: validation of AttentionParams and its translation into the tile
// kernel's parameter block, shared by the prefill and decode launchers.
#pragma once

#include <string>

#include "kernels/attention/attention.h"
#include "kernels/attention/kernel_params.h"

namespace gemma::kernels::attention {

// "" when `p` describes a launch the kernels support; else what is wrong.
std::string ValidateParams(const AttentionParams& p, bool decode);

// Fields common to prefill and decode; the caller sets the row mapping
// (heads_per_block, tokens_per_block), num_splits and partial.
KernelParams ToKernelParams(const AttentionParams& p);

// "" or the name of the launch error the runtime reports.
std::string LastLaunchError(const char* what);

}  // namespace gemma::kernels::attention
