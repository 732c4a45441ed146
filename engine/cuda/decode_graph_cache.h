// The decode pass (layers, logits, argmax) of every batch bucket as a CUDA
// graph: a decode batch runs as the graph of the next bucket (1, 2, 4, ...,
// capped at max_slots and at the pass size, which bounds every activation
// buffer), padded with empty sequences. A bucket runs eagerly the first
// time (kernels loaded, attributes set), is captured right after, and is
// replayed from then on. Every per-step value lives in the forward's fixed
// metadata block, and attention reads lengths from it, so one graph serves
// every depth.
// Thread-safety: owned by the backend's thread.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <set>

#include "absl/status/status.h"
#include "engine/cuda/model_forward.h"

namespace gemma::cuda {

class DecodeGraphCache {
 public:
  // `enabled` false: every decode pass runs eagerly, unpadded.
  DecodeGraphCache(int max_slots, int max_pass_tokens, bool enabled)
      : max_slots_(max_slots), max_pass_tokens_(max_pass_tokens), enabled_(enabled) {}
  ~DecodeGraphCache();
  DecodeGraphCache(const DecodeGraphCache&) = delete;
  DecodeGraphCache& operator=(const DecodeGraphCache&) = delete;

  bool enabled() const { return enabled_; }
  // The batch a decode pass of `batch` sequences runs as: its bucket, or
  // itself with graphs off.
  int Bucket(int batch) const;
  // Every bucket a decode batch can take (start-up captures them all).
  std::set<int> Buckets() const;
  // Runs the decode pass of `batch` tokens (REQUIRES: batch == Bucket(batch)
  // with graphs on) whose metadata is on the device: logits and argmax of
  // every row.
  absl::Status Run(ModelForward& forward, int batch, cudaStream_t stream);

 private:
  // Records the decode pass for `batch` tokens without running it.
  absl::Status Capture(ModelForward& forward, int batch, cudaStream_t stream);

  const int max_slots_, max_pass_tokens_;
  const bool enabled_;
  std::map<int, cudaGraphExec_t> graphs_;  // only buckets that ran eagerly first
};

}  // namespace gemma::cuda
