// Decode-time linear layer for 1..8 tokens: out[b, n] = sum_k w[n, k] x[b, k]
// with bf16 weights in nn.Linear layout [n, k] and fp32 accumulation. Decode
// is a stream of the weights, so the kernel is built for bandwidth: 16-byte
// loads that bypass L1, several rows per warp, many loads in flight. The
// inputs x are small and re-read through L1.
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). No engine types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

namespace gemma::kernels {

constexpr int kGemvMaxBatch = 8;

struct GemvParams {
  const __nv_bfloat16* w = nullptr;  // [n, k]
  const __nv_bfloat16* x = nullptr;  // [batch, k]
  __nv_bfloat16* out_bf16 = nullptr; // [batch, n], or
  float* out_f32 = nullptr;          // [batch, n] (exactly one of the two)
  int n = 0;
  int k = 0;                         // multiple of 8
  int batch = 0;                     // 1..kGemvMaxBatch
  float softcap = 0.0f;              // > 0: out = cap * tanh(out / cap) (fp32 out only)
  int variant = -1;                  // tiling, 0..NumGemvVariants()-1; -1 picks a default
};

// Variants [0, NumGemvSimtVariants()) run on CUDA cores (any batch); the rest
// are tensor-core tilings (mma.sync m16n8k16, batch padded to 8) that accept
// batch 2..kGemvMaxBatch only. The default (-1) is a CUDA-core tiling at batch
// 1 and a tensor-core one above.
int NumGemvVariants();
int NumGemvSimtVariants();
bool GemvVariantUsesTensorCores(int variant);
bool GemvVariantSupportsBatch(int variant, int batch);
const char* GemvVariantName(int variant);
std::string LaunchGemv(const GemvParams& p, cudaStream_t stream);

}  // namespace gemma::kernels
