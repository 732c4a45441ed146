#include "engine/sampling/row_sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/sampling/sample_rng.h"

namespace gemma {
namespace {

constexpr double kMassScale = 1099511627776.0;  // 2^40, as the kernel

// Larger value first, then lower id; NaN last.
bool Better(float v, int i, float bv, int bi) {
  if (std::isnan(v)) return false;
  if (std::isnan(bv)) return true;
  return v > bv || (v == bv && i < bi);
}

}  // namespace

int32_t SampleRow(std::span<const float> logits, const RowSampling& row) {
  const int vocab = static_cast<int>(logits.size());
  float best = -std::numeric_limits<float>::max();
  int best_i = vocab;
  if (IsGreedy(row)) {  // the argmax, lowest id on ties, NaN never
    for (int i = 0; i < vocab; ++i)
      if (Better(logits[i], i, best, best_i)) best = logits[i], best_i = i;
    return best_i < vocab ? best_i : 0;
  }
  const float inv_t = 1.0f / row.temperature;
  std::vector<float> y(vocab);
  for (int i = 0; i < vocab; ++i) {
    y[i] = std::isnan(logits[i]) ? -INFINITY : logits[i] * inv_t;
    if (Better(logits[i] * inv_t, i, best, best_i)) best = logits[i] * inv_t, best_i = i;
  }
  const float max = best;
  std::vector<float> sorted(y);
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  float floor = -INFINITY;
  bool truncated = false;
  if (row.top_k > 0 && row.top_k < vocab) floor = sorted[row.top_k - 1], truncated = true;
  if (row.top_p < 1.0f) {
    auto mass = [&](float v) { return static_cast<uint64_t>(static_cast<double>(std::exp(v - max)) * kMassScale); };
    uint64_t kept = 0;
    for (float v : sorted)
      if (v >= floor) kept += mass(v);
    const double target = static_cast<double>(kept) * static_cast<double>(row.top_p);
    const uint64_t rank = target < 1.0 ? 1 : static_cast<uint64_t>(target);
    uint64_t cumulative = 0;
    for (size_t j = 0; j < sorted.size() && sorted[j] >= floor; ++j) {
      // Equal values enter together (the kernel keeps every tie).
      size_t end = j;
      while (end + 1 < sorted.size() && sorted[end + 1] == sorted[j]) ++end;
      for (size_t t = j; t <= end; ++t) cumulative += mass(sorted[t]);
      if (cumulative >= rank) {
        floor = std::max(floor, sorted[j]);
        truncated = true;
        break;
      }
      j = end;
    }
  }
  if (row.min_p > 0.0f) floor = std::max(floor, max + std::log(row.min_p)), truncated = true;
  best = -std::numeric_limits<float>::max();
  best_i = vocab;
  for (int i = 0; i < vocab; ++i) {
    if (truncated && !(y[i] >= floor)) continue;
    const float u = kernels::SampleUniform(row.seed, row.step, static_cast<uint32_t>(i));
    const float score = y[i] - std::log(-std::log(u));
    if (Better(score, i, best, best_i)) best = score, best_i = i;
  }
  return best_i < vocab ? best_i : 0;
}

}  // namespace gemma
