// --weights int4: the layers' matrices, loaded as bf16 (from the checkpoint or
// the random init), quantized on the device to Q4_0 in the W4A16 layout
// (kernels/quant/w4_quant.h): one arena of packed codes (k padded to 128) and
// fp16 scales (one per 32 columns), each matrix 256-byte aligned. The bf16
// matrices are overwritten with the dequantized values, which prefill and
// decode batches above the GEMV's reach multiply with the bf16 GEMM: the same
// weights as the GEMV's, at bf16 GEMM speed, for the memory of the bf16 copy.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "engine/cuda/device_weights.h"
#include "kernels/gemv/gemv_w4a16.h"
#include "kernels/quant/w4_quant.h"

namespace gemma::cuda {
namespace {

constexpr int kGroup = 32;

int64_t Align(int64_t bytes) { return (bytes + 255) / 256 * 256; }
int64_t PackedBytes(int64_t n, int k) { return Align(n * kernels::W4PaddedK(k) / 2); }
int64_t ScaleBytes(int64_t n, int k) { return Align(n * (kernels::W4PaddedK(k) / kGroup) * 2); }

// Quantizes the bf16 matrix `m` [n, k] into `arena` at `*at`; returns its int4
// view. `keep_bf16`: the bf16 matrix is overwritten with the dequantized
// values and kept as the view's w4_bf16 (the large-batch GEMM then reads it
// instead of dequantizing per call; the arena is this object's own memory).
absl::StatusOr<DeviceMatrix> QuantizeInto(const DeviceMatrix& m, int64_t n, int k, uint8_t* arena, int64_t* at,
                                          bool keep_bf16, cudaStream_t stream) {
  if (m.fp8() || m.int4()) return absl::InternalError("int4: a matrix is not bf16");
  if (k % kGroup != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--weights int4: a [", n, ", ", k,
                                                   "] matrix: Q4_0 needs the input dimension a multiple of 32"));
  }
  uint8_t* packed = arena + *at;
  __half* scales = reinterpret_cast<__half*>(arena + *at + PackedBytes(n, k));
  *at += PackedBytes(n, k) + ScaleBytes(n, k);
  kernels::QuantizeQ4_0Params p;
  p.in_bf16 = m.bf16();
  p.w = packed;
  p.scales = scales;
  p.n = n;
  p.k = k;
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchQuantizeQ4_0(p, stream));
  DeviceMatrix q = DeviceMatrix::Int4(packed, scales, kGroup);
  if (keep_bf16) {
    auto* bf16 = const_cast<__nv_bfloat16*>(m.bf16());
    GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchDequantizeW4({packed, scales, bf16, n, k, kGroup}, stream));
    q.w4_bf16 = bf16;
  }
  return q;
}

}  // namespace

absl::Status DeviceWeights::QuantizeLinearsInt4(const ModelConfig& c, cudaStream_t stream) {
  if (int4_.get() != nullptr) return absl::OkStatus();
  struct Mat {
    DeviceMatrix* m;
    int64_t n;
    int k;
  };
  std::vector<Mat> mats;
  for (int l = 0; l < c.num_layers; ++l) {
    DeviceLayer& d = layers_[l];
    const int q_width = c.num_heads * c.layers[l].head_dim;
    mats.push_back({&d.qkv, d.qkv_rows, c.hidden_size});
    mats.push_back({&d.o_proj, c.hidden_size, q_width});
    mats.push_back({&d.gate_up, 2 * int64_t{c.intermediate_size}, c.hidden_size});
    mats.push_back({&d.down_proj, c.hidden_size, c.intermediate_size});
  }
  int64_t total = 0;
  for (const Mat& m : mats) total += PackedBytes(m.n, m.k) + ScaleBytes(m.n, m.k);
  GEMMA_STATUS_RETURN_IF_ERROR(int4_.Allocate(total));
  int64_t at = 0;
  for (const Mat& m : mats) {
    auto q = QuantizeInto(*m.m, m.n, m.k, int4_.get<uint8_t>(), &at, /*keep_bf16=*/true, stream);
    if (!q.ok()) return q.status();
    *m.m = *q;
  }
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  dtype_ = WeightDType::kINT4;
  spdlog::info("cuda: {} linear matrices quantized to int4 (Q4_0, W4A16): {:.2f} GB", mats.size(), total / 1e9);
  return absl::OkStatus();
}

absl::Status DeviceWeights::QuantizeLmHeadInt4(cudaStream_t stream) {
  if (lm_head_int4_.get() != nullptr) return absl::OkStatus();
  GEMMA_STATUS_RETURN_IF_ERROR(lm_head_int4_.Allocate(PackedBytes(vocab_, hidden_) + ScaleBytes(vocab_, hidden_)));
  int64_t at = 0;
  // The embedding lookup keeps the checkpoint's values: no bf16 copy.
  auto q = QuantizeInto(DeviceMatrix(embed_), vocab_, hidden_, lm_head_int4_.get<uint8_t>(), &at,
                        /*keep_bf16=*/false, stream);
  if (!q.ok()) return q.status();
  lm_head_int4_matrix_ = *q;
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  spdlog::info("cuda: LM head quantized to int4 ({:.2f} GB next to the bf16 embedding)", lm_head_int4_.bytes() / 1e9);
  return absl::OkStatus();
}

}  // namespace gemma::cuda
