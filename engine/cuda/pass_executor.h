// Runs a Forward's chunks on the device: checks them, cuts them into passes
// (step_plan.h), copies each pass's metadata up, runs it (decode passes
// through the decode graph cache), draws sampled rows on the device
// (kernels/sampling) and brings logits or ids back to the host. Owns the
// pinned host buffers and the sampling buffers; the forward, the pools and
// the graph cache are the backend's. warmup.cc holds its start-up runs.
// Thread-safety: owned by the backend's thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/cuda/common/cuda_util.h"
#include "engine/cuda/decode_graph_cache.h"
#include "engine/cuda/kv_pools.h"
#include "engine/cuda/model_forward.h"
#include "engine/cuda/step_plan.h"

namespace gemma::cuda {

class PassExecutor {
 public:
  struct Limits {
    int max_slots = 0;
    int max_context = 0;
    int pass_tokens = 0;  // the most tokens one pass holds
  };
  // `forward`, `pools` and `graphs` must outlive the executor.
  static absl::StatusOr<std::unique_ptr<PassExecutor>> Create(const ModelConfig& config, const Limits& limits,
                                                             ModelForward* forward, const KvPools* pools,
                                                             DecodeGraphCache* graphs, cudaStream_t stream);

  // Slots, positions, token ids and block tables of every chunk.
  absl::Status Validate(std::span<const SequenceChunk> chunks) const;
  // Every chunk's logits rows, copied to the host; with `argmax` also each
  // chunk's argmax id (next_ids). REQUIRES: Validate(chunks) passed.
  absl::Status ForwardLogits(std::span<const SequenceChunk> chunks, bool argmax, ForwardResult* result);
  // The id of every chunk's last position: drawn with `rows` (one per chunk)
  // on the device, or with `rows` empty the argmax. REQUIRES: as above.
  absl::Status ForwardIds(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                          std::vector<int32_t>* next_ids);

  // Start-up (warmup.cc): every bucket's decode graph, so no request pays
  // for a capture; and one full prefill pass, so the attention tiles and the
  // GEMM algorithms of the pass size are tuned before the first request.
  absl::Status CaptureDecodeGraphs();
  absl::Status WarmUpPrefill();

 private:
  // What a pass returns: logits rows to the host, and/or one id per result
  // row (a chunk, or with logits a logits row), drawn with `rows` (per
  // chunk; ids only) or, rows empty, the argmax.
  struct PassOutput {
    float* logits = nullptr;
    int32_t* ids = nullptr;
    std::span<const RowSampling> rows;
    bool argmax() const { return ids != nullptr && rows.empty(); }
  };
  PassExecutor(const ModelConfig& config, const Limits& limits, ModelForward* forward, const KvPools* pools,
               DecodeGraphCache* graphs, cudaStream_t stream)
      : config_(config), limits_(limits), forward_(forward), pools_(pools), graphs_(graphs), stream_(stream) {}
  absl::Status Allocate();
  // Copies the used prefix of the pass's metadata block to the device.
  absl::Status Upload(const PassPlan& plan);
  absl::Status RunPass(PassPlan& plan, const PassOutput& want);
  // Draws logits rows [begin, begin + count) (in the forward's logits
  // buffer) with their chunks' parameters on the device, then collects the ids.
  absl::Status Sample(const PassPlan& plan, int begin, int count, const PassOutput& want);
  // Copies logits rows [begin, begin + count) when the result wants logits,
  // and their ids from `device_ids` when given, to their rows of the result.
  absl::Status Collect(const PassPlan& plan, int begin, int count, const int32_t* device_ids,
                       const PassOutput& want);

  const ModelConfig& config_;
  const Limits limits_;
  ModelForward* forward_;
  const KvPools* pools_;
  DecodeGraphCache* graphs_;
  cudaStream_t stream_;
  DeviceBuffer host_meta_, host_logits_, host_ids_;  // pinned
  DeviceBuffer host_sample_rows_, sample_rows_, sample_ids_;  // per logits row
};

}  // namespace gemma::cuda
