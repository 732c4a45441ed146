// The one owner of the CUDA backend's autotuned kernel choices and of the
// GEMMA_* switches that steer them (switches.h; docs/tuning.md lists every
// switch and every choice, and says where each is timed). The paths that
// launch kernels time their own candidates (they know how to launch them)
// and record the winner in choices(); they read it back on every launch.
// A new tuned path adds its table to TunedChoices and records into it.
//
// Start-up (TuneLinears): every linear of the model, before decode graphs
// are captured and the paged KV pool takes the memory left: the GEMV tiling
// of each (n, k, batch) and, for fp8 matrices with a TMA descriptor, the
// wgmma FP8 linear against the GEMV / cuBLASLt per decode bucket.
// Thread-safety: owned by the backend's thread.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <span>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/statusor.h"
#include "engine/cuda/common/device_matrix.h"
#include "engine/cuda/linear/switches.h"
#include "kernels/attention/prefill_tuning.h"

namespace gemma::cuda {

class LinearDispatcher;  // linear.h

// (n, k, batch) of a GEMV, (n, k, bucket) of the wgmma linear.
using ShapeKey = std::tuple<int, int, int>;

// Measured fp8 GEMV choices of one (n, k, batch): the fastest E4M3-input
// variant, the fastest bf16-input (a16) one, and the quantization an E4M3
// variant needs when x comes unquantized.
struct Fp8GemvChoice {
  int e4m3 = -1;
  float e4m3_ms = 0.0f;
  int a16 = -1;
  float a16_ms = 0.0f;
  float quant_ms = 0.0f;
};

// One measured (n, k, bucket) of the wgmma FP8 linear: the fastest variant
// x K split or stream-K grid (variant -1: no candidate could run) and the
// baseline's time on the same launches (the fp8 GEMV's at buckets up to
// kGemvMaxBatch, else cuBLASLt's).
struct WgmmaChoice {
  int variant = -1;
  int splits = 1;
  int streamk_per_sm = 0;  // > 0: stream-K over this many CTAs per SM (splits 1)
  float wgmma_ms = 0.0f;
  float baseline_ms = 0.0f;
  // Not cached: what the baseline must beat wgmma by to be taken
  // (WgmmaPath::set_lt_margin_ms).
  float baseline_margin_ms = 0.0f;
};

// (m, n, k, fp32 out, fp8 inputs) of a cuBLASLt GEMM.
using GemmKey = std::tuple<int, int, int, bool, bool>;

// Every autotuned choice, by kind, with where it is timed.
struct TunedChoices {
  std::map<ShapeKey, int> gemv_bf16;           // GEMV variant: LinearDispatcher::Autotune
  std::map<ShapeKey, Fp8GemvChoice> gemv_fp8;  // LinearDispatcher::Autotune
  std::map<ShapeKey, int> gemv_int4;           // W4A16 GEMV variant: LinearDispatcher::AutotuneInt4
  // Batch 1 where the reader adds partial sums (TunedMatrix::partial_sums):
  // a split W4A16 tiling, kept only where it beat gemv_int4's by
  // LinearDispatcher::kInt4SplitMarginMs (LinearDispatcher::AutotuneInt4).
  std::map<ShapeKey, int> gemv_int4_split;
  std::map<ShapeKey, WgmmaChoice> wgmma;       // WgmmaPath::Autotune
  // The algorithm each planned GEMM runs: timed at first use for the hot
  // shapes (LtGemm::Tune), else the heuristic's first.
  std::map<GemmKey, cublasLtMatmulAlgo_t> gemm_algo;
  // Prefill attention tile per (head_dim, shape bucket): a configuration
  // name of kernels/attention, "" for its default. Tuner::PrefillAttentionTile
  // at the first prefill pass of the bucket (the warm-up pass at start-up).
  std::map<std::pair<int, std::string>, std::string> prefill_attention;
};

// One linear of the model as decode runs it.
struct TunedMatrix {
  DeviceMatrix w;
  int n = 0, k = 0;
  bool lm_head = false;  // fp32 out, softcapped
  // Decode hands it x already in E4M3 when it wants that (the producing
  // norm or gelu gate writes the codes): QKV, gate/up and down; not o_proj
  // (attention output) or the LM head.
  bool codes_given = false;
  // Decode's reader of its output applies an fp8 GEMM's scales itself
  // (LinearDispatcher::Run's LeftScales, GEMMA_FP8_LEFT_SCALES): gate|up,
  // and o_proj and down without tensor parallelism.
  bool scales_left = false;
  // Decode's reader of its output adds a batch-1 int4 linear's partial sums
  // (the residual norm, GEMMA_INT4_SPLIT_K): o_proj and down without tensor
  // parallelism.
  bool partial_sums = false;
};

class Tuner {
 public:
  // Points the autotune cache file (shared with the attention kernels) at
  // switches.autotune / autotune_cache, and the attention kernels' prefill
  // tables at switches.prefill_wgmma.
  explicit Tuner(const TuningSwitches& switches);
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  const TuningSwitches& switches() const { return switches_; }
  TunedChoices& choices() { return choices_; }
  const TunedChoices& choices() const { return choices_; }

  // GEMV tilings of every matrix for batches 1 .. min(max_slots,
  // kGemvMaxBatch), then the wgmma FP8 linear for decode batches up to max_m
  // (fp8 matrices only; a tuning failure that leaves the device usable only
  // costs that path). `lm_head_softcap`: the LM head's final logit softcap.
  absl::Status TuneLinears(LinearDispatcher& linear, std::span<const TunedMatrix> mats, int max_slots, int max_m,
                           float lm_head_softcap, cudaStream_t stream);
  // The prefill attention configuration for `params` ("": the kernels'
  // default): from the tables, else the autotune cache file, else timed now
  // on params' real buffers (synchronizes the stream; not while it captures
  // a graph: then "" and nothing kept). tuner_attention.cc.
  absl::StatusOr<std::string> PrefillAttentionTile(const kernels::AttentionParams& params, cudaStream_t stream);

 private:
  absl::Status TuneGemv(LinearDispatcher& linear, std::span<const TunedMatrix> mats, int max_slots,
                        cudaStream_t stream);
  absl::Status TuneWgmma(LinearDispatcher& linear, std::span<const TunedMatrix> mats, int max_m,
                         float lm_head_softcap, cudaStream_t stream);

  const TuningSwitches switches_;
  TunedChoices choices_;
};

}  // namespace gemma::cuda
