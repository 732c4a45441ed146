// The CUDA backend: Gemma 4 on one NVIDIA GPU in bf16. Weights are uploaded
// once (or generated at the real shape for benchmarks). The KV cache is
// paged: block pools sized from free memory, the engine's block tables say
// where each position lives (code that drives the backend without the
// engine takes its tables from engine/core/slot_tables.h). Long chunks run
// as passes of at most max_chunk_tokens; decode steps replay a CUDA graph
// per batch bucket (1, 2, 4, ..., captured at start-up).
//
// Thread-safety: like every Backend, called only from the engine's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/core/backend_options.h"
#include "engine/cuda/omitted_launches.h"
#include "engine/model/weights.h"

namespace gemma {
namespace cuda {
class AllReduce;
}

// The most tokens a pass holds when CudaTuning::max_chunk_tokens is 0.
inline constexpr int kMaxAutoChunkTokens = 5120;

// Whether the current CUDA device has at least 70 GiB (the GPUs that hold the
// 31B: H100, H200): the line between the larger and smaller defaults of the
// pass size and of the server's step budget.
bool OnLargeCudaDevice();

// Knobs of the CUDA backend beyond BackendOptions (benchmarks, debugging).
struct CudaTuning {
  // Tokens per pass; bounds the activations. 0: about 4096 on a GPU with
  // >= 70 GiB, else about 2048, rounded so a global layer's prefill attention
  // fills whole waves of the GPU (see AutoChunkTokens in cuda_backend.cc);
  // never more than BackendOptions::max_tokens_per_step when that is set.
  int max_chunk_tokens = 0;
  int decode_splits = 0;        // split-K partitions of decode attention; 0 = auto
  // Time the GEMV tilings per shape at start, and the cuBLASLt algorithms of
  // full-size prefill passes at first use.
  bool autotune_gemv = true;
  // The embedding is scaled by sqrt(H) in the compute dtype: bf16(sqrt(H))
  // for bf16 serving (73.5 at H = 5376). The fixtures' float64 references use
  // it unrounded; parity tests ask for that (it matters only when sqrt(H) is
  // not a bf16 value, e.g. tiny-random's H = 128).
  bool exact_embed_scale = false;
  uint64_t random_seed = 1234;  // random_weights
  // A tensor-parallel rank (engine/cuda/tp): the device it runs on, its
  // shard's model (engine/parallel/rank_model.h: config and host slices;
  // with random_weights only the config is read) instead of model_dir's,
  // and the all-reduce that sums its o_proj and down_proj outputs with the
  // other ranks'. Defaults: device 0, model_dir, no all-reduce.
  int device = 0;
  const LoadedModel* model = nullptr;
  cuda::AllReduce* all_reduce = nullptr;
  // Called once by start-up after its last device-wide synchronizing call
  // (allocation, pool set-up) and before its first pass: the ranks meet
  // there, so no rank synchronizes a GPU on which another rank's all-reduce
  // is already waiting for it (ranks sharing a GPU).
  std::function<void()> before_first_pass;
  // Timing only: launches every pass leaves out (omitted_launches.h).
  cuda::OmittedLaunches omit;
};

class CudaBackend : public Backend {
 public:
  ~CudaBackend() override;
  const ModelConfig& config() const override;
  std::string name() const override { return "cuda"; }
  int max_slots() const override;
  int max_context() const override;
  KvCacheSpec kv_cache_spec() const override;
  void ResetSlot(int slot) override;
  // Device picking: argmax when every row is greedy (fused into the logits,
  // and in the decode graphs), else the sampling kernel
  // (kernels/sampling/sample.h); only ids cross to the host. With logits
  // asked for (WantsLogits), they are copied to the host too, and sampled
  // (non-greedy) rows are drawn there by the same rule (all_logits is
  // honoured only then).
  bool can_sample_on_device() const override { return true; }
  absl::Status Forward(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                       ForwardResult* result) override;

  int chunk_tokens() const;  // tokens per pass in use
  int64_t weight_bytes() const;
  int64_t kv_cache_bytes() const override;
  // cudaMemGetInfo of device 0 (the one the backend runs on).
  std::optional<size_t> device_memory_used_bytes() const override;

  struct Impl;

 private:
  friend absl::StatusOr<std::unique_ptr<CudaBackend>> CreateCudaBackendWithTuning(
      const BackendOptions&, const CudaTuning&);
  explicit CudaBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

absl::StatusOr<std::unique_ptr<CudaBackend>> CreateCudaBackendWithTuning(const BackendOptions& options,
                                                                        const CudaTuning& tuning);
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options);
// True when a CUDA device is visible.
bool CudaDeviceAvailable();

}  // namespace gemma
