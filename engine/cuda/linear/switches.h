// The environment switches of the linear layers' kernel choices, parsed in
// one place (docs/tuning.md lists every GEMMA_* switch, with the autotune
// cache's two in kernels/attention/autotune.h). They are A/B and debugging
// knobs: the defaults are what serving runs. Read when a LinearDispatcher is
// created, which hands them to its parts (tests set them per instance).
// Thread-safety: plain data; FromEnv only reads the environment.
#pragma once

#include <set>
#include <string>

namespace gemma::cuda {

// The largest decode batch the wgmma FP8 linear serves (WgmmaPath::kMaxM).
inline constexpr int kWgmmaFp8MaxM = 64;

enum class WgmmaPreference {
  kMeasured,  // the faster of wgmma and the baseline, as timed
  kOff,       // the baseline only (GEMV / cuBLASLt)
  kForce,     // wgmma wherever a candidate was timed (tests, A/B)
};

struct TuningSwitches {
  // GEMMA_FP8_A16 (default 1): 0 leaves the fp8 GEMVs that read bf16 x
  // (a16) out of autotuning.
  bool fp8_a16 = true;
  // GEMMA_FP8_WGMMA (default 1 = kMeasured): 0 = kOff, force = kForce.
  WgmmaPreference fp8_wgmma = WgmmaPreference::kMeasured;
  // GEMMA_FP8_WGMMA_SHAPES (default empty = all): comma-separated "NxK"
  // shapes the wgmma FP8 linear may serve.
  std::set<std::string> fp8_wgmma_shapes;
  // GEMMA_FP8_WGMMA_MAX_M (default kWgmmaFp8MaxM = 64): the largest decode
  // batch the wgmma FP8 linear may serve; 0..64.
  int fp8_wgmma_max_m = kWgmmaFp8MaxM;
  // GEMMA_FP8_OUTER_VEC (default 1): 0 keeps cuBLASLt's FP8 GEMMs off the
  // outer-vector scale mode (the scales then go through our epilogue).
  bool fp8_outer_vec = true;
  // GEMMA_FP8_FAST_ACCUM (default 1): 0 makes FP8 GEMMs promote partial sums
  // to fp32 (and the wgmma linear use only its promoting variants).
  bool fp8_fast_accum = true;

  // Parsed from the environment; a malformed value is logged and the
  // default kept.
  static TuningSwitches FromEnv();
};

}  // namespace gemma::cuda
