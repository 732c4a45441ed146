// Reads a fixture's golden outputs (golden.json + golden.safetensors) with the
// project's own safetensors reader.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/model/safetensors.h"

namespace gemma::testing {

struct GoldenPrompt {
  std::string kind;                  // "text" or "ids"
  std::string text;
  std::vector<int32_t> ids;          // prompt, <bos> first
  std::vector<int32_t> greedy;       // next greedy ids
  std::string greedy_text;
  std::vector<double> margins;       // top-1 minus top-2 logit per greedy step
  std::vector<float> prefill_logits; // [ids.size(), vocab]
  std::vector<float> step_logits;    // [greedy.size(), vocab]; row 0 = last prefill position
};

struct Golden {
  int vocab_size = 0;
  std::vector<GoldenPrompt> prompts;
};

// Loads DIR/golden.json and DIR/golden.safetensors; aborts the test on error.
Golden LoadGolden(const std::string& model_dir, int vocab_size);

// Index of the first greedy step whose margin is below `min_margin`
// (greedy.size() if none): tokens before it must match exactly.
size_t FirstLowMarginStep(const GoldenPrompt& prompt, double min_margin);

}  // namespace gemma::testing
