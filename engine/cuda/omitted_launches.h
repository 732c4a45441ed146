// Timing only (gemma-bench --omit): kinds of launch the forward leaves out of
// every pass, so that a benchmark shows what each costs inside the replayed
// decode graph (where programmatic launches overlap kernels, so isolated
// kernel times do not add up to a step). The outputs are then wrong.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gemma::cuda {

struct OmittedLaunches {
  bool norms = false;      // the residual norms after each layer's attention and MLP
  bool qkv_rope = false;   // QK norms, RoPE and the KV-cache write
  bool attention = false;  // QKV-RoPE, the attention kernel and its split merge
  bool linears = false;    // the layers' linears (not the LM head)

  bool any() const { return norms || qkv_rope || attention || linears; }
};

// "norms,qkv-rope,attention,linears" (any subset, comma-separated; empty:
// none); an unknown name is an error that names it.
absl::StatusOr<OmittedLaunches> ParseOmittedLaunches(std::string_view list);
// The inverse, for logs ("none" when nothing is left out).
std::string OmittedLaunchesName(const OmittedLaunches& o);

}  // namespace gemma::cuda
