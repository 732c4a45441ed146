// One CUDA graph per decode batch size: the whole decode pass (layers,
// logits, argmax) captured on first use and replayed afterwards. Every
// per-step value lives in the forward's fixed metadata block, and attention
// reads lengths from it, so one graph serves every depth.
// Thread-safety: owned by the backend's thread.
#pragma once

#include <cuda_runtime.h>

#include <map>

#include "absl/status/status.h"
#include "engine/cuda/model_forward.h"

namespace gemma::cuda {

class DecodeGraphs {
 public:
  DecodeGraphs() = default;
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  bool Has(int batch) const { return graphs_.count(batch) > 0; }
  // Records the decode pass for `batch` tokens without running it.
  // REQUIRES: the pass ran eagerly once (kernels loaded, attributes set).
  absl::Status Capture(ModelForward& forward, int batch, cudaStream_t stream);
  absl::Status Replay(int batch, cudaStream_t stream);

 private:
  std::map<int, cudaGraphExec_t> graphs_;
};

}  // namespace gemma::cuda
