// The wgmma FP8 linear (kernels/gemv/wgmma_fp8.h) inside LinearDispatcher: for
// decode batches of up to kMaxM tokens of fp8 matrices that carry a TMA
// descriptor (DeviceMatrix::wgmma), LinearDispatcher launches it instead of what
// it would run otherwise — the fp8 GEMV at m <= kGemvMaxBatch, cuBLASLt's FP8
// GEMM (+ scale epilogue) above — where start-up timing measured it faster.
// This object holds what that takes: the split-K / stream-K scratch (Reserve, once,
// before any graph capture), the timing of the candidates, whose measured
// choice per (n, k, bucket) it records in the Tuner (TunedChoices::wgmma;
// also kept in the autotune cache file, next to the GEMV's), and the launch.
//
// Why measured per shape and bucket, not assumed: the kernel streams the
// weights at up to ~4 TB/s where cuBLASLt's skinny FP8 GEMMs reach ~2.4-2.75,
// and its TMA ring beats the GEMV's per-thread loads on the tall matrices
// (QKV, gate/up) even at one token, but which variant x K split or
// stream-K grid gets there depends on the row tiles per SM of each shape
// and on m (stream-K has no partial last wave, which back-to-back timing
// would hide and a real step pays for); where no candidate
// beats the baseline (the GEMV or cuBLASLt), the baseline stays. Every GEMV
// batch (1..kGemvMaxBatch) is its own bucket (the GEMV's time grows with m,
// the 16-token wgmma's does not); above, batches between buckets take the
// choice of the next tuned bucket above them (its token tile covers them).
//
// At the GEMV batches only variants that promote each 128-k tile to fp32
// ("wgp-") compete: the GEMV accumulates in fp32, and the tensor cores' own
// FP8 accumulation ("wg-", ~20x the error at k = 21504) would cost decode
// accuracy there; above, "wg-" matches cuBLASLt's fast accumulation.
//
// A/B switches for experiments: GEMMA_FP8_WGMMA_SHAPES=16384x5376,... lets
// only the listed n x k shapes take wgmma; GEMMA_FP8_WGMMA_MAX_M=M only
// batches up to M (everything is tuned as usual).
// GEMMA_FP8_WGMMA=0: off, GEMV / cuBLASLt only and nothing tuned (A/B runs);
// GEMMA_FP8_WGMMA=force: the fastest wgmma candidate wherever one was timed,
// even where the baseline measured faster (A/B of the kernel itself). With
// GEMMA_FP8_FAST_ACCUM=0 only the variants that promote to fp32 compete (the
// accuracy cuBLASLt then has). Thread-safety: owned by LinearDispatcher's thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "engine/cuda/common/cuda_util.h"
#include "engine/cuda/common/device_matrix.h"
#include "engine/cuda/linear/switches.h"
#include "engine/cuda/linear/tuner.h"

namespace gemma::cuda {

struct LinearArgs;  // linear.h

// Cache line of a choice: "<variant name or -> <splits> <stream-K CTAs per
// SM> <wgmma ns> <baseline ns>" (whole nanoseconds, so a cached choice
// decides alike).
std::string FormatWgmmaCacheEntry(const WgmmaChoice& c);
// The choice in `value`; nullopt when malformed or naming what this build
// would not run at `bucket` tokens: an unknown variant, one whose token tile
// is narrower than the bucket, a tensor-core-accumulating ("wg-") one when
// fast accumulation is off or at a GEMV batch, splits outside
// 1..kWgmmaFp8MaxSplits, stream-K CTAs per SM outside 0..kMaxStreamKPerSm or
// with splits, negative times. (The scratch fit is the caller's check.)
std::optional<WgmmaChoice> ParseWgmmaCacheEntry(const std::string& value, int bucket, bool fast_accum);

class WgmmaPath {
 public:
  // The largest decode bucket tuned; batches above run cuBLASLt. (Was 32:
  // at 64 the choice then lost ~0.65 ms per decode step, timed back to back
  // without a stand-in and with stream-K grids that left slots empty; with
  // both fixed it gains 0.14 ms per step at batch 64, H200 31B.)
  static constexpr int kMaxM = kWgmmaFp8MaxM;
  // Split-K partials: candidates needing more are skipped.
  static constexpr size_t kMaxWorkspaceBytes = size_t{64} << 20;
  // K splits tried, and at most this many CTAs per SM from them (more only
  // queue behind each other and add fixup traffic); stream-K grids of as
  // many CTAs per SM as fit (variants that fit more than kMaxStreamKPerSm
  // take none).
  static constexpr int kSplits[] = {1, 2, 3, 4, 6, 8};
  static constexpr int kMaxCtasPerSm = 4;
  static constexpr int kMaxStreamKPerSm = 2;

  // Takes GEMMA_FP8_WGMMA, _SHAPES, _MAX_M and GEMMA_FP8_FAST_ACCUM from
  // the tuner's switches; records its choices there.
  explicit WgmmaPath(Tuner& tuner);
  WgmmaPreference preference() const { return preference_; }
  // Tests and A/B runs; overrides GEMMA_FP8_WGMMA (kOff after tuning keeps
  // the tuned choices for a later kMeasured).
  void set_preference(WgmmaPreference p) { preference_ = p; }
  // Off for good (tuning failed): frees the split-K scratch too.
  void Disable();

  // Split-K / stream-K workspace (capped at kMaxWorkspaceBytes) and arrival
  // counters for matrices of up to max_n rows, zeroed (synchronously: the
  // engine's stream does not wait for the legacy stream). No-op when off or
  // already that large. Without it only unsplit, non-stream-K candidates run.
  absl::Status Reserve(int max_n);

  // The buckets tuned for decode batches of up to max_m: every batch
  // 1..kGemvMaxBatch, then 16, 32 and 64 capped at max_m (e.g. max_m 20:
  // 1..8, 16, 20).
  static std::vector<int> Buckets(int max_m);

  // Times the baseline (`baseline`: runs one LinearArgs as LinearDispatcher
  // would without wgmma) against every wgmma variant x split that can take
  // each bucket (the narrowest token tile that covers it; at GEMV batches
  // searched once, then re-timed per batch), for the matrices `mats` of
  // shape [n, k] (all with descriptors), and remembers the result (from the
  // cache when there). `codes_given`: whether decode hands this shape its x
  // already quantized (a producing norm or gelu gate); if not, both sides
  // are timed from bf16 x — the baseline as it chooses (a16 GEMVs need no
  // codes), wgmma behind `quantize` (fills a.x_fp8 / a.x_scale). Each timing is a launch
  // sequence rotating through `mats`: pass every layer's matrix of the
  // shape so the weights stream from HBM as in a decode step (a single
  // matrix under ~50 MB stays in L2 and flatters both paths alike).
  // Allocates scratch for the run: call at start-up, before capture. Logs
  // one line per shape.
  absl::Status Autotune(std::span<const DeviceMatrix> mats, int n, int k, int max_m, bool out_f32, float softcap,
                        bool codes_given, const std::function<absl::Status(const LinearArgs&)>& baseline,
                        const std::function<absl::Status(LinearArgs&)>& quantize, cudaStream_t stream);

  // The choice Run takes for w [n, k] at m tokens: null for the baseline
  // (off, no descriptor, m outside [1, kMaxM], untuned — at GEMV batches the
  // very batch must have been tuned — or the baseline measured faster).
  const WgmmaChoice* ChoiceFor(const DeviceMatrix& w, int n, int k, int m) const;
  // Launches c for a (a.x_fp8 and a.x_scale set); "" on success, else why
  // not (nothing was launched when validation failed).
  std::string Launch(const LinearArgs& a, const WgmmaChoice& c, cudaStream_t stream);
  // "wgp-n16c2t1s6 x4" (4 K splits), "wg-n64c2t2s5 sk1" (stream-K, one CTA
  // per SM), "GEMV" or "cuBLASLt": what Run takes (logs, tests).
  std::string Describe(const DeviceMatrix& w, int n, int k, int m) const;
  static std::string Name(const WgmmaChoice& c);

  // `codes_given` as in Autotune (it changes what GEMV buckets compare).
  std::string CacheKey(int n, int k, int bucket, bool codes_given = true) const;
  // What else the GEMV baseline's choice depends on (e.g. "/no-a16"): part
  // of the GEMV buckets' cache keys.
  void set_gemv_key_suffix(std::string s) { gemv_key_suffix_ = std::move(s); }
  // The same for the cuBLASLt buckets (e.g. "/left": timed without the
  // scaling kernel, LinearDispatcher's LeftScales).
  void set_lt_key_suffix(std::string s) { lt_key_suffix_ = std::move(s); }
  // cuBLASLt's GEMMs launch without programmatic dependent launch, so in a
  // decode step the kernel after one loses its early start, which the
  // tuner's stand-in does not show. Where that matters, a cuBLASLt bucket is
  // taken only when it measured faster than wgmma by this margin (set before
  // Autotune; 0 by default).
  void set_lt_margin_ms(float ms) { lt_margin_ms_ = ms; }
  // The margin for the shapes whose scales are left to the consumer
  // (GEMMA_FP8_LEFT_SCALES): H200, int4 + fp8 KV at 16 rows, gate|up and
  // down moved to cuBLASLt on margins of 1.0-1.3 us and the step took
  // 0.44 ms longer (12.19 -> 12.63 ms), ~4.8 us per such launch.
  static constexpr float kLeftScalesLtMarginMs = 0.004f;
  int cache_hits() const { return cache_hits_; }

 private:
  // Whether the scratch holds a launch of c over n rows.
  bool Fits(const WgmmaChoice& c, int n) const;
  bool Load(int n, int k, int bucket, bool codes_given);
  void Store(int n, int k, int bucket, bool codes_given) const;

  std::map<ShapeKey, WgmmaChoice>& choices_;  // the tuner's (n, k, bucket) table
  float lt_margin_ms_ = 0.0f;
  WgmmaPreference preference_ = WgmmaPreference::kMeasured;
  bool fast_accum_ = true;
  int num_sms_ = 0;
  DeviceBuffer workspace_;  // fp32 split-K partials
  DeviceBuffer counters_;   // int per row tile, zero between launches
  size_t workspace_floats_ = 0;
  int num_counters_ = 0;
  int cache_hits_ = 0;
  std::string gemv_key_suffix_;
  std::string lt_key_suffix_;
  std::set<std::string> only_shapes_;  // GEMMA_FP8_WGMMA_SHAPES (empty: all)
  int max_m_ = kMaxM;                  // GEMMA_FP8_WGMMA_MAX_M
};

}  // namespace gemma::cuda
