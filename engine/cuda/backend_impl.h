// Internal to engine/cuda: the CUDA backend's state and the steps of a
// Forward, split by concern over cuda_backend.cc (set-up and the Backend
// methods), kv_pools.cc (paged pools, table checks), warmup.cc (decode
// graphs of every bucket, the warm-up pass) and pass_executor.cc
// (validating chunks, running passes, sampling, collecting results). The
// parts it owns: the weights, the KV cache, the linear dispatcher
// (linear/), the model's forward enqueuer and the decode graphs.
// Thread-safety: owned by the backend's thread (like the Backend).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <set>
#include <span>
#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/common/cuda_util.h"
#include "engine/cuda/decode_graphs.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/kv_cache.h"
#include "engine/cuda/linear/linear.h"
#include "engine/cuda/model_forward.h"
#include "engine/cuda/step_plan.h"

namespace gemma {

using cuda::DeviceBuffer;

struct CudaBackend::Impl {
  BackendOptions options;
  CudaTuning tuning;
  ModelConfig config;
  int max_context = 0;
  int chunk_tokens = 0;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::DeviceWeights> weights;
  cuda::KvCache cache;
  std::unique_ptr<cuda::LinearDispatcher> linear;
  std::unique_ptr<cuda::ModelForward> forward;
  cuda::DecodeGraphs graphs;
  std::set<int> decode_ran_eagerly;  // batch sizes safe to capture
  DeviceBuffer host_meta, host_logits, host_ids;  // pinned
  DeviceBuffer host_sample_rows, sample_rows, sample_ids;  // per logits row

  ~Impl() {
    if (stream) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
  }
  absl::Status Init(const BackendOptions& o, const CudaTuning& t);
  absl::Status LoadWeights();
  absl::Status CreatePagedCache();
  absl::Status CaptureDecodeGraphs();
  absl::Status WarmUpPrefill();
  int DecodeBucket(int batch) const;
  absl::Status Validate(std::span<const SequenceChunk> chunks) const;
  absl::Status ValidateTables(const SequenceChunk& c) const;
  // What a pass returns: logits rows to the host, and/or one id per result
  // row (a chunk, or with logits a logits row), drawn with `rows` (per
  // chunk; ids only) or, rows empty, the argmax.
  struct PassOutput {
    float* logits = nullptr;
    int32_t* ids = nullptr;
    std::span<const RowSampling> rows;
    bool argmax() const { return ids != nullptr && rows.empty(); }
  };
  absl::Status RunPass(cuda::PassPlan& plan, const PassOutput& want);
  absl::Status Sample(const cuda::PassPlan& plan, int begin, int count, const PassOutput& want);
  // REQUIRES: Validate(chunks) passed.
  absl::Status ForwardLogits(std::span<const SequenceChunk> chunks, bool argmax, ForwardResult* result);
  absl::Status ForwardIds(std::span<const SequenceChunk> chunks, const PassOutput& want, std::vector<int32_t>* next_ids);
  absl::Status EnqueueDecode(int batch);
  absl::Status Collect(const cuda::PassPlan& plan, int begin, int count, const int32_t* device_ids,
                       const PassOutput& want);
};

}  // namespace gemma
