#include "kernels/sampling/sample.h"

#include <cfloat>

#include "kernels/common/launch.h"
#include "kernels/sampling/sample_rng.h"

namespace gemma::kernels {
namespace {

constexpr int kThreads = 1024;
constexpr int kBins = 256;
constexpr double kMassScale = 1099511627776.0;  // 2^40: exp(y - max) <= 1, a row sums below 2^58

// Float order as unsigned order.
__device__ __forceinline__ uint32_t Key(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float FromKey(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// (value, index): larger value wins, then smaller index; NaN loses.
__device__ __forceinline__ bool Better(float v, int i, float bv, int bi) {
  if (v != v) return false;
  if (bv != bv) return true;
  return v > bv || (v == bv && i < bi);
}

struct Shared {
  float vals[32];
  int idxs[32];
  unsigned long long sums[32];
  unsigned int count_hist[kBins];
  unsigned long long mass_hist[kBins];
  unsigned int selected;
  unsigned long long remaining;
};

__device__ void BlockArgmax(float& best, int& best_i, Shared& s) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (Better(ov, oi, best, best_i)) best = ov, best_i = oi;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) s.vals[warp] = best, s.idxs[warp] = best_i;
  __syncthreads();
  best = s.vals[0], best_i = s.idxs[0];
  for (int w = 1; w < kThreads / 32; ++w)
    if (Better(s.vals[w], s.idxs[w], best, best_i)) best = s.vals[w], best_i = s.idxs[w];
}

__device__ unsigned long long BlockSum(unsigned long long v, Shared& s) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) s.sums[warp] = v;
  __syncthreads();
  unsigned long long total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += s.sums[w];
  return total;
}

__device__ __forceinline__ uint32_t umax(uint32_t a, uint32_t b) { return a > b ? a : b; }

__device__ __forceinline__ float Scaled(const float* row, int i, float inv_t) {
  const float x = row[i];
  return x != x ? -INFINITY : x * inv_t;
}

__device__ __forceinline__ unsigned long long Mass(float y, float row_max) {
  return static_cast<unsigned long long>(static_cast<double>(expf(y - row_max)) * kMassScale);
}

// Radix select, most significant digit first: the key of the `rank`-th
// largest (by count) or of the threshold where the mass of larger-or-equal
// keys first reaches `rank` (by mass), among keys >= floor_key.
template <bool kByMass>
__device__ uint32_t RadixSelect(const float* row, int vocab, float inv_t, float row_max, uint32_t floor_key,
                                unsigned long long rank, Shared& s) {
  uint32_t prefix = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    const uint32_t high_mask = shift == 24 ? 0u : 0xFFFFFFFFu << (shift + 8);
    for (int b = threadIdx.x; b < kBins; b += kThreads) {
      if constexpr (kByMass) s.mass_hist[b] = 0; else s.count_hist[b] = 0;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const float y = Scaled(row, i, inv_t);
      const uint32_t key = Key(y);
      if ((key & high_mask) != prefix || key < floor_key) continue;
      const int bin = (key >> shift) & (kBins - 1);
      if constexpr (kByMass) {
        const unsigned long long m = Mass(y, row_max);
        if (m) atomicAdd(&s.mass_hist[bin], m);
      } else {
        atomicAdd(&s.count_hist[bin], 1u);
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long above = 0;
      unsigned int chosen = 0;
      for (int b = kBins - 1; b >= 0; --b) {
        const unsigned long long h = kByMass ? s.mass_hist[b] : s.count_hist[b];
        if (h > 0) chosen = b;  // lowest non-empty bin so far: the fallback
        if (above + h >= rank) {
          chosen = b;
          break;
        }
        above += h;
      }
      s.selected = chosen;
      s.remaining = rank > above ? rank - above : 1;
    }
    __syncthreads();
    prefix |= s.selected << shift;
    rank = s.remaining;
    __syncthreads();
  }
  return prefix;
}

__global__ void __launch_bounds__(kThreads) SampleKernel(const __grid_constant__ SampleParams p) {
  __shared__ Shared s;
  const SampleRowParams r = p.rows[blockIdx.x];
  const float* row = p.logits + static_cast<size_t>(blockIdx.x) * p.vocab;
  const bool greedy = IsGreedy(r);
  const float inv_t = greedy ? 1.0f : 1.0f / r.temperature;

  float best = -FLT_MAX;
  int best_i = p.vocab;
  for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
    const float v = row[i] * inv_t;
    if (Better(v, i, best, best_i)) best = v, best_i = i;
  }
  BlockArgmax(best, best_i, s);
  if (greedy) {
    if (threadIdx.x == 0) p.out[blockIdx.x] = best_i < p.vocab ? best_i : 0;
    return;
  }
  const float row_max = best;
  uint32_t floor_key = 0;  // keep keys >= floor_key
  if (r.top_k > 0 && r.top_k < p.vocab)
    floor_key = RadixSelect<false>(row, p.vocab, inv_t, row_max, 0, static_cast<unsigned long long>(r.top_k), s);
  if (r.top_p < 1.0f) {
    unsigned long long kept = 0;
    for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
      const float y = Scaled(row, i, inv_t);
      if (Key(y) >= floor_key) kept += Mass(y, row_max);
    }
    kept = BlockSum(kept, s);
    const double target = static_cast<double>(kept) * static_cast<double>(r.top_p);
    const unsigned long long rank = target < 1.0 ? 1ull : static_cast<unsigned long long>(target);
    floor_key = umax(floor_key, RadixSelect<true>(row, p.vocab, inv_t, row_max, floor_key, rank, s));
  }
  if (r.min_p > 0.0f) floor_key = umax(floor_key, Key(row_max + logf(r.min_p)));
  const float floor_value = FromKey(floor_key);

  // Gumbel-max over the kept tokens.
  best = -FLT_MAX;
  best_i = p.vocab;
  for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
    const float y = Scaled(row, i, inv_t);
    if (!(y >= floor_value) && floor_key != 0) continue;
    const float u = SampleUniform(r.seed, r.step, static_cast<uint32_t>(i));
    const float score = y - logf(-logf(u));
    if (Better(score, i, best, best_i)) best = score, best_i = i;
  }
  BlockArgmax(best, best_i, s);
  if (threadIdx.x == 0) p.out[blockIdx.x] = best_i < p.vocab ? best_i : 0;
}

}  // namespace

std::string LaunchSample(const SampleParams& p, cudaStream_t stream) {
  if (p.logits == nullptr || p.rows == nullptr || p.out == nullptr) return "sample: null pointer";
  if (p.num_rows <= 0 || p.vocab <= 0)
    return "sample: num_rows and vocab must be positive, got " + std::to_string(p.num_rows) + " and " +
           std::to_string(p.vocab);
  SampleKernel<<<p.num_rows, kThreads, 0, stream>>>(p);
  return LaunchError("sample");
}

}  // namespace gemma::kernels
