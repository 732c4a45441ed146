// The CPU reference backend: the full Gemma 4 forward in fp32 from bf16 (or
// f16/f32) weights, a KV cache per slot (sliding layers keep only the
// window), several sequences per step, work split over all cores.
//
// Thread-safety: like every Backend, driven by one thread.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/model/weights.h"

namespace gemma {

struct CpuBackendOptions {
  int max_slots = 8;
  int max_context = 4096;
  int num_threads = 0;  // 0 = all cores
};

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const LoadedModel& model,
                                                          const CpuBackendOptions& options);

}  // namespace gemma
