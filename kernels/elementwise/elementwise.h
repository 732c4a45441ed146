// Element-wise kernels of the Gemma 4 forward: embedding gather, the
// gelu-tanh gate, row gather and the final logit softcap.
//
// Launchers validate, never allocate or synchronize (graph-safe), and return
// an error message ("" on success). No engine types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace gemma::kernels {

struct EmbeddingParams {
  const int32_t* token_ids = nullptr;     // [num_tokens]; ids outside [0, vocab) read row 0
  const __nv_bfloat16* table = nullptr;   // [vocab, hidden]
  float* out = nullptr;                   // [num_tokens, hidden] fp32 residual stream
  int num_tokens = 0;
  int hidden = 0;                         // multiple of 8
  int vocab = 0;
  float scale = 1.0f;                     // Gemma: bf16(sqrt(hidden))
};
std::string LaunchEmbedding(const EmbeddingParams& p, cudaStream_t stream);

// out[t, i] = gelu_tanh(in[t, i]) * in[t, inter + i]: the fused gate|up
// projection's output feeds the down projection. With out_fp8, out is also
// quantized to E4M3 per row for an fp8 down projection (the bits
// LaunchQuantizeRowsFp8 would write for `out`); that runs one block per row
// and supports inter up to 32768.
struct GeluGateParams {
  const __nv_bfloat16* in = nullptr;  // [num_tokens, 2 * inter] (gate | up)
  __nv_bfloat16* out = nullptr;       // [num_tokens, inter]
  int num_tokens = 0;
  int inter = 0;                      // multiple of 8
  uint8_t* out_fp8 = nullptr;         // [num_tokens, inter] E4M3 of out, or nullptr
  float* out_scale = nullptr;         // [num_tokens] its per-row scales; required with out_fp8
  // Optional, both or neither: `in` holds an FP8 GEMM's unscaled sums, whose
  // value is in[t, c] * in_col_scale[c] * in_token_scale[t] (the scales that
  // GEMM left to its consumer, cuda::LinearDispatcher's LeftScales).
  const float* in_col_scale = nullptr;    // [2 * inter]
  const float* in_token_scale = nullptr;  // [num_tokens]
};
std::string LaunchGeluGate(const GeluGateParams& p, cudaStream_t stream);

// dst[r] = src[rows[r]]: picks the token rows that need logits.
struct GatherRowsParams {
  const __nv_bfloat16* src = nullptr;  // [*, width]
  const int32_t* rows = nullptr;       // [num_rows]
  __nv_bfloat16* dst = nullptr;        // [num_rows, width]
  int num_rows = 0;
  int width = 0;                       // multiple of 8
};
std::string LaunchGatherRows(const GatherRowsParams& p, cudaStream_t stream);

// x = cap * tanh(x / cap), in place.
struct SoftcapParams {
  float* x = nullptr;  // [count]
  int64_t count = 0;
  float cap = 0.0f;    // > 0
};
std::string LaunchSoftcap(const SoftcapParams& p, cudaStream_t stream);

// One block that only waits for the previous kernel and then lets the next
// one launch (PDL): what a decode step's small kernels between two linears
// (norm, gelu gate, quantization) do to the linears' overlap. Start-up
// tuners launch it between timed launches, so that a launch's partial last
// wave is not hidden behind the next launch's start.
std::string LaunchPdlStandIn(cudaStream_t stream);

// Test support for the PDL contract (kernels/common/pdl.cuh): one block that
// lets the next kernel launch at once, then waits `delay_ns` and only then
// copies each (dst, src, bytes): a predecessor that writes late. A kernel
// launched after it with PDL sees those bytes only if it reads them after
// its WaitForPreviousKernel().
inline constexpr int kMaxLateCopies = 16;
struct LateCopyParams {
  struct Copy {
    void* dst = nullptr;
    const void* src = nullptr;
    size_t bytes = 0;
  };
  Copy copies[kMaxLateCopies];
  int count = 0;         // 0..kMaxLateCopies
  int64_t delay_ns = 0;  // >= 0
};
std::string LaunchLateCopy(const LateCopyParams& p, cudaStream_t stream);

}  // namespace gemma::kernels
