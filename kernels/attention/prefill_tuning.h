// For a tuner outside the kernels (the engine's Tuner): the shape bucket a
// prefill attention tile is chosen per (queries up to 8192 tokens, GQA
// group, window, cache dtype), and a timing of every configuration that fits
// this GPU on `params` (real buffers: `out` is overwritten with the correct
// result; synchronizes the stream, fails while it captures a graph) that
// only reports the fastest in *best ("" for a head_dim with a single, padded
// configuration). Neither reads or writes the autotune cache; the engine
// launches its choice with LaunchPrefillAttentionWithConfig (attention.h).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/attention/attention.h"

namespace gemma::kernels {

std::string PrefillAttentionBucket(const AttentionParams& params);
std::string TimePrefillAttention(const AttentionParams& params, cudaStream_t stream, std::string* best);

// Whether the prefill tables hold the Hopper wgmma candidates (the switch
// GEMMA_PREFILL_WGMMA). The engine's Tuner sets it from its switches before
// any prefill launch; until set, the variable is read here. A head_dim's
// table is built once, at its first use: a later change does not reach it.
void ConfigurePrefillWgmma(bool enabled);
bool PrefillWgmmaEnabled();

}  // namespace gemma::kernels
