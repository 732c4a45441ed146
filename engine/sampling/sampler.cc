#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace gemma {
namespace {

// Order for "best first": higher logit, ties broken by lower id so results do
// not depend on the sort algorithm.
struct BetterLogit {
  std::span<const float> logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  }
};

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

float MaxOver(std::span<const float> logits, std::span<const int32_t> ids) {
  float max = -std::numeric_limits<float>::infinity();
  for (int32_t id : ids) max = std::max(max, logits[id]);
  return max;
}

// Uniform in [0, 1) from the top 53 bits: unlike std::uniform_real_distribution
// this is the same on every standard library, so seeds reproduce everywhere.
double Uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

SequenceSampler::SequenceSampler(const SamplingParams& params, std::span<const int32_t> prompt,
                                 uint64_t fallback_seed)
    : params_(params), rng_(params.seed.value_or(fallback_seed)) {
  if (params_.repetition_penalty != 1.0f) seen_.insert(prompt.begin(), prompt.end());
}

void SequenceSampler::Accept(int32_t token_id) {
  ++output_counts_[token_id];
  if (params_.repetition_penalty != 1.0f) seen_.insert(token_id);
}

void SequenceSampler::ApplyPenalties(std::span<float> logits) const {
  const auto in_vocab = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < logits.size(); };
  if (params_.repetition_penalty != 1.0f) {
    // Hugging Face's rule: dividing a positive logit and multiplying a negative
    // one both make the token less likely for a penalty > 1.
    const float penalty = params_.repetition_penalty;
    for (int32_t id : seen_) {
      if (!in_vocab(id)) continue;
      float& logit = logits[id];
      logit = logit > 0.0f ? logit / penalty : logit * penalty;
    }
  }
  if (params_.presence_penalty == 0.0f && params_.frequency_penalty == 0.0f) return;
  for (const auto& [id, count] : output_counts_) {
    if (!in_vocab(id)) continue;
    logits[id] -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
  }
}

SampleResult SequenceSampler::Sample(std::span<float> logits) {
  ApplyPenalties(logits);
  SampleResult result;
  if (params_.greedy()) {
    result.token_id = Argmax(logits);
  } else {
    const float inv_temperature = 1.0f / params_.temperature;
    for (float& logit : logits) logit *= inv_temperature;
    SelectCandidates(logits);
    result.token_id = Draw(logits);
  }
  FillLogprobs(logits, result);
  Accept(result.token_id);
  return result;
}

void SequenceSampler::SelectCandidates(std::span<const float> logits) {
  candidates_.resize(logits.size());
  std::iota(candidates_.begin(), candidates_.end(), 0);
  const bool truncate_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < logits.size();
  if (truncate_k) TopK(logits, static_cast<size_t>(params_.top_k));
  if (params_.top_p < 1.0f) TopP(logits);
  if (params_.min_p > 0.0f) MinP(logits);
}

void SequenceSampler::TopK(std::span<const float> logits, size_t k) {
  const BetterLogit better{logits};
  std::nth_element(candidates_.begin(), candidates_.begin() + (k - 1), candidates_.end(), better);
  candidates_.resize(k);
  std::sort(candidates_.begin(), candidates_.end(), better);
}

// Keeps the smallest best-first prefix whose probability (renormalized over
// the current candidates) reaches top_p. Sorting the whole vocabulary is
// avoided: the nucleus is usually small, so sort a prefix and widen it only
// while it holds too little mass.
void SequenceSampler::TopP(std::span<const float> logits) {
  const BetterLogit better{logits};
  const float max = MaxOver(logits, candidates_);
  double total = 0.0;
  for (int32_t id : candidates_) total += std::exp(static_cast<double>(logits[id] - max));
  const double target = params_.top_p * total;
  const size_t n = candidates_.size();
  const bool sorted = std::is_sorted(candidates_.begin(), candidates_.end(), better);
  for (size_t prefix = sorted ? n : std::min<size_t>(n, 1024);; prefix = std::min(n, prefix * 8)) {
    if (!sorted) {
      std::partial_sort(candidates_.begin(), candidates_.begin() + prefix, candidates_.end(), better);
    }
    double mass = 0.0;
    for (size_t i = 0; i < prefix; ++i) {
      mass += std::exp(static_cast<double>(logits[candidates_[i]] - max));
      if (mass >= target) {
        candidates_.resize(i + 1);  // always at least one token
        return;
      }
    }
    if (prefix == n) return;  // rounding left the target just out of reach: keep all
  }
}

// Drops tokens whose probability is below min_p times the best one's; the
// comparison is done on logits (prob ratio = exp(logit difference)).
void SequenceSampler::MinP(std::span<const float> logits) {
  const float max = MaxOver(logits, candidates_);
  const float threshold = max + std::log(params_.min_p);
  std::erase_if(candidates_, [&](int32_t id) { return logits[id] < threshold; });
}

int32_t SequenceSampler::Draw(std::span<const float> logits) {
  const float max = MaxOver(logits, candidates_);
  weights_.resize(candidates_.size());
  double total = 0.0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    weights_[i] = std::exp(logits[candidates_[i]] - max);
    total += weights_[i];
  }
  const double target = Uniform01(rng_) * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += weights_[i];
    if (target < cumulative) return candidates_[i];
  }
  // Unreachable for finite logits (the scan repeats the sum that made `total`);
  // with all logits -inf or NaN the best candidate is the least surprising answer.
  return *std::min_element(candidates_.begin(), candidates_.end(), BetterLogit{logits});
}

void SequenceSampler::FillLogprobs(std::span<const float> logits, SampleResult& result) {
  if (params_.num_logprobs < 0) return;
  float max = -std::numeric_limits<float>::infinity();
  for (float logit : logits) max = std::max(max, logit);
  double sum = 0.0;
  for (float logit : logits) sum += std::exp(static_cast<double>(logit - max));
  const float log_normalizer = max + static_cast<float>(std::log(sum));
  result.logprob = logits[result.token_id] - log_normalizer;

  const size_t n = std::min(static_cast<size_t>(params_.num_logprobs), logits.size());
  if (n == 0) return;
  candidates_.resize(logits.size());
  std::iota(candidates_.begin(), candidates_.end(), 0);
  std::partial_sort(candidates_.begin(), candidates_.begin() + n, candidates_.end(),
                    BetterLogit{logits});
  result.top.clear();
  for (size_t i = 0; i < n; ++i) {
    result.top.push_back({candidates_[i], logits[candidates_[i]] - log_normalizer});
  }
}

}  // namespace gemma
