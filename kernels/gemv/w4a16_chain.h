// A chain of W4A16 linears for one token, run by one persistent kernel: the
// linears run in order, each over every multiprocessor, with a grid barrier
// between them, and each may read what an earlier one wrote (its x is any
// bf16 vector: the caller's, or an earlier linear's output). Before a
// barrier every warp has already issued the next linear's first weight
// loads (weights depend on nothing), so the read pipeline stays full across
// linears, where kernels launched one after another drain it at each end
// and refill it at each start.
//
// Weights are in the tiled layout of kernels/quant/w4_layout.h (the same
// matrices GemvW4Params takes), x rows of batch 1, out bf16; a paired gate|up
// matrix may write gelu_tanh(gate) * up (n / 2 values) as GemvW4Params does.
//
// The launch is cooperative: all blocks are resident at once (one per
// multiprocessor), which the barrier needs. A linear's x must not be written
// by that linear or a later one. `barrier` is W4ChainBarrierBytes()
// of device memory, zeroed once before the first launch; every launch leaves
// it ready for the next (CUDA-graph safe). Launches that share a barrier
// must not run concurrently. Launchers validate, never allocate or
// synchronize, and return an error message ("" on success).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace gemma::kernels {

inline constexpr int kW4ChainMaxLinears = 16;
inline constexpr int kW4ChainMaxK = 32768;
inline constexpr int kW4ChainMaxNormK = 16384;

// A linear's x made from the residual stream (Gemma's norms around a
// block), the residual norm's math (kernels/norm/residual_norm.h) at one
// token: h' = s * (h + rms_norm(branch) * branch_weight), then
// x = rms_norm(h') * out_weight (bf16); every block computes it for itself,
// block 0 stores h' to residual_out (a buffer other than residual_in: the
// other blocks still read h).
struct W4ChainNorm {
  const __nv_bfloat16* branch = nullptr;  // [k], e.g. an earlier linear's out
  const float* branch_weight = nullptr;   // [k]
  const float* layer_scalar = nullptr;    // [1] on the device, or nullptr for 1
  const float* residual_in = nullptr;     // [k] fp32
  float* residual_out = nullptr;          // [k] fp32
  const float* out_weight = nullptr;      // [k]
  float eps = 1e-6f;
};

struct W4ChainLinear {
  const uint8_t* w = nullptr;         // tiled codes (W4TiledCodeBytes)
  const __half* scales = nullptr;     // tiled scales (W4TiledScaleBytes)
  const __nv_bfloat16* x = nullptr;   // [k], 16-byte aligned; or, with has_norm, null
  __nv_bfloat16* out = nullptr;       // [n], or [n / 2] with gelu_gate
  int n = 0;
  int k = 0;                          // multiple of 32, <= kW4ChainMaxK
  bool paired = false;                // w is a paired tiling (n a multiple of 16)
  bool gelu_gate = false;             // paired only: out = gelu_tanh(gate) * up
  bool has_norm = false;              // x from `norm` (k <= kW4ChainMaxNormK)
  W4ChainNorm norm;
};

struct W4ChainParams {
  W4ChainLinear linears[kW4ChainMaxLinears];
  int count = 0;                      // 1..kW4ChainMaxLinears
  unsigned* barrier = nullptr;        // W4ChainBarrierBytes(), zeroed before first use
  int variant = -1;                   // 0..NumW4ChainVariants()-1; -1 = the default
};

size_t W4ChainBarrierBytes();
int NumW4ChainVariants();
const char* W4ChainVariantName(int variant);
std::string LaunchW4Chain(const W4ChainParams& p, cudaStream_t stream);

}  // namespace gemma::kernels
