#include "engine/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>

namespace gemma::cpu {
namespace {

// Eight independent partial sums let the compiler vectorize without
// reassociating a single float reduction.
inline float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

void MatMul(ThreadPool& pool, const float* x, int64_t rows, const float* w, int64_t in,
            int64_t out, float* y) {
  // Split over output features so every thread streams a disjoint slice of w;
  // each weight row is reused for all token rows while it is in cache. Waking
  // the pool costs tens of microseconds, so each part gets >= 256K MACs.
  const int64_t grain = std::max<int64_t>(16, (int64_t{1} << 18) / std::max<int64_t>(1, rows * in));
  pool.ParallelFor(out, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const float* wr = w + o * in;
      for (int64_t t = 0; t < rows; ++t) y[t * out + o] = Dot(x + t * in, wr, in);
    }
  });
}

void RmsNorm(float* x, const float* w, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(sum / n + eps));
  if (w) {
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] * inv * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
  }
}

void ApplyRope(float* head, int head_dim, int pairs, float theta, int32_t position) {
  const int half = head_dim / 2;
  for (int k = 0; k < pairs; ++k) {
    const double inv_freq = std::pow(static_cast<double>(theta), -2.0 * k / head_dim);
    const float angle = static_cast<float>(position) * static_cast<float>(inv_freq);
    const float c = std::cos(angle), s = std::sin(angle);
    const float x1 = head[k], x2 = head[k + half];
    head[k] = x1 * c - x2 * s;
    head[k + half] = x2 * c + x1 * s;
  }
}

float GeluTanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

}  // namespace gemma::cpu
