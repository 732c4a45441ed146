// Builds a Backend by name. The only place that knows every backend.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/core/backend_options.h"

namespace gemma {

// True when the CUDA backend is compiled in and a device is visible.
bool CudaAvailable();

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);

// The step token budget a server uses when none is given, as vLLM chooses its
// max_num_batched_tokens for serving: 8 192 on a CUDA device with at least 70
// GiB of memory (H100, H200), 2 048 on a smaller one, 512 on the cpu backend
// (whose steps take time in proportion).
int DefaultMaxTokensPerStep(const BackendOptions& options);

}  // namespace gemma
