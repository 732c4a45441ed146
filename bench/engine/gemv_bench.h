// Bandwidth of the decode GEMV (batch 1) on a model's linear shapes, every
// tiling variant timed; the fastest is reported.
#pragma once

#include <string>
#include <vector>

#include "engine/model/config.h"

namespace gemma {

struct GemvBenchRow {
  int n = 0, k = 0;
  std::string variant;  // fastest
  double us = 0;        // per call
  double tb_s = 0;      // weight bytes / time
};

std::vector<GemvBenchRow> RunGemvBench(const ModelConfig& config);

}  // namespace gemma
