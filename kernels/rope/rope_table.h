// The (cos, sin) of every RoPE angle for positions [0, positions):
// table[pos * rope_pairs + k] = (cos, sin) of pos * theta^(-2k / head_dim),
// the same fp32 values qkv_rope rotates with. Decode attention reads it to
// rebuild keys from values (attention.h: AttentionParams::rope_table).
// Validates, never allocates or synchronizes; returns "" or an error.
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace gemma::kernels {

struct RopeTableParams {
  float2* table = nullptr;  // [positions][rope_pairs]
  int positions = 0;
  int rope_pairs = 0;       // <= head_dim / 2
  int head_dim = 0;
  float theta = 10000.0f;
};

std::string LaunchRopeTable(const RopeTableParams& p, cudaStream_t stream);

}  // namespace gemma::kernels
