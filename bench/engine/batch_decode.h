// gemma-bench --batches: the decode step of the CUDA backend at batch B with
// a paged KV cache, B sequences each prefilled to a context c, without the
// engine or gRPC in between. Comparing contexts separates the per-step cost
// that grows with the context (attention over the KV) from the rest
// (weights, launches).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_backend.h"

namespace gemma {

struct BatchDecodeRow {
  int batch = 0, context = 0;
  double step_ms = 0;  // one decode step of the whole batch
  double tok_s = 0;    // batch / step
};

// Runs `steps` timed greedy decode steps (after 2 untimed) for every
// (context, batch); sequences are prefilled in real forward passes.
// REQUIRES: a paged backend whose pools hold max(batches) sequences of
// max(contexts) + steps + 2 tokens.
absl::StatusOr<std::vector<BatchDecodeRow>> RunBatchDecode(CudaBackend& backend, const std::vector<int>& batches,
                                                           const std::vector<int>& contexts, int steps);

}  // namespace gemma
