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

}  // namespace gemma
