#include "kernels/rope/rope_table.h"

#include <cmath>

#include "kernels/common/launch.h"
#include "kernels/rope/rope_angle.cuh"

namespace gemma::kernels {
namespace {

__global__ void RopeTableKernel(const RopeTableParams p) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(p.positions) * p.rope_pairs) return;
  const int pos = static_cast<int>(i / p.rope_pairs), k = static_cast<int>(i % p.rope_pairs);
  float s, c;
  RopeSinCos(pos, k, p.head_dim, p.theta, &s, &c);
  p.table[i] = make_float2(c, s);
}

}  // namespace

std::string LaunchRopeTable(const RopeTableParams& p, cudaStream_t stream) {
  if (p.table == nullptr) return "rope table: null table";
  if (p.positions <= 0) return "rope table: positions must be positive, got " + std::to_string(p.positions);
  if (p.head_dim <= 0 || p.head_dim % 2 != 0)
    return "rope table: head_dim must be positive and even, got " + std::to_string(p.head_dim);
  if (p.rope_pairs <= 0 || p.rope_pairs > p.head_dim / 2)
    return "rope table: rope_pairs must be in [1, head_dim / 2], got " + std::to_string(p.rope_pairs);
  if (!std::isfinite(p.theta) || p.theta <= 0.0f) return "rope table: theta must be positive";
  const int64_t n = static_cast<int64_t>(p.positions) * p.rope_pairs;
  constexpr int kThreads = 256;
  RopeTableKernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(p);
  return LaunchError("rope table");
}

}  // namespace gemma::kernels
