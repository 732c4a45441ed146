// fp32 building blocks of the CPU reference forward. Plain loops the compiler
// vectorizes; the heavy ones split work over a ThreadPool.
#pragma once

#include <cstdint>
#include <span>

#include "engine/cpu/thread_pool.h"

namespace gemma::cpu {

// y[t, o] = sum_i x[t, i] * w[o, i]  for t < rows. w is nn.Linear [out, in].
void MatMul(ThreadPool& pool, const float* x, int64_t rows, const float* w, int64_t in,
            int64_t out, float* y);

// x[i] = x[i] / sqrt(mean(x^2) + eps) * (w ? w[i] : 1), over n elements.
void RmsNorm(float* x, const float* w, int64_t n, float eps);

// Rotate-half RoPE on one head of `head_dim`: the first `pairs` frequency
// pairs rotate (dim k with dim k + head_dim/2), angle pos * theta^(-2k/head_dim).
void ApplyRope(float* head, int head_dim, int pairs, float theta, int32_t position);

float GeluTanh(float x);

}  // namespace gemma::cpu
