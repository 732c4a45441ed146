// Builds a Backend by name. The only place that knows every backend.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/core/backend.h"

namespace gemma {

struct BackendOptions {
  std::string backend = "auto";   // cpu | cuda | auto (cuda when a GPU is present)
  std::string model_dir;          // config.json + safetensors (+ tokenizer.model)
  bool random_weights = false;    // cuda only: real shapes, deterministic random weights
  int max_slots = 8;              // sequences that can be in flight together
  int max_context = 4096;         // tokens per sequence (capped by the model's max)
  int num_threads = 0;            // cpu: 0 = all cores
  bool use_cuda_graphs = true;    // cuda: replay the captured decode step
  int kv_block_size = 16;         // tokens per KV block; cuda: 0 = per-slot caches
  // Blocks per pool; 0 = cpu: max_slots full contexts, cuda: sized from free
  // GPU memory (cuda: the global pool; the sliding pool holds every slot's window).
  int num_kv_blocks = 0;
  double gpu_memory_utilization = 0.9;  // cuda: share of GPU memory this process may fill
};

// True when the CUDA backend is compiled in and a device is visible.
bool CudaAvailable();

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);

}  // namespace gemma
