// --weights int4: the layers' matrices, read as bf16 (from the checkpoint or
// the random init; one at a time into a scratch when the load deferred them,
// DeviceWeights::Upload's defer_int4_linears), quantized on the device to Q4_0 (kernels/quant/w4_quant.h:
// row layout into a scratch, then tiled for the W4A16 kernels): one arena of
// tiled codes and fp16 scales (one per 32 columns), each matrix 256-byte
// aligned. For passes of more rows than the W4A16 kernel serves well, a copy
// (`Int4Copy`, chosen by the backend from TuningSwitches): by default
// (GEMMA_INT4_FP8_COPY=1) an E4M3 copy of the dequantized values with per-row
// scales (as --weights fp8 holds its matrices), the bf16 matrices freed: such
// passes run the fp8 path. With GEMMA_INT4_FP8_COPY=0, GEMMA_INT4_BF16_COPY
// (default 1) keeps the bf16 matrices instead, overwritten with the
// dequantized values (cuBLASLt reads them: the int4 values exactly, at bf16
// GEMM speed); 0 frees them (only the embedding stays bf16; such passes then
// dequantize a matrix per call into the linear's scratch).
// A W4A16 (compressed-tensors) checkpoint's matrices are not quantized: their
// codes and scales go into the row layout as they are, rearranged on the host
// straight from the mapped checkpoint (ReadInt4ForDevice), and through the same
// tiling; the modules its quantization_config ignores stay bf16 (and so does
// the bf16 arena).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/device_weights.h"
#include "engine/model/int4_checkpoint.h"
#include "engine/model/quantization_int4.h"
#include "kernels/gemv/gemv_w4a16.h"
#include "kernels/quant/fp8_quant.h"
#include "kernels/quant/w4_quant.h"

namespace gemma::cuda {
namespace {

constexpr int kGroup = 32;

int64_t Align(int64_t bytes) { return (bytes + 255) / 256 * 256; }
int64_t RowPackedBytes(int64_t n, int k) { return Align(n * kernels::W4PaddedK(k) / 2); }
int64_t RowScaleBytes(int64_t n, int k) { return Align(n * (kernels::W4PaddedK(k) / kGroup) * 2); }
int64_t TiledBytes(int64_t n, int k) {
  return Align(kernels::W4TiledCodeBytes(n, k)) + Align(kernels::W4TiledScaleBytes(n, k));
}

// Where a matrix goes: the arena and its offset, the row-layout scratch, and
// how it is tiled. `paired`: the paired tiling of a fused gate|up matrix
// (kernels/quant/w4_layout.h), taken where its rows are a multiple of 16.
struct TileTarget {
  uint8_t* arena;
  int64_t* at;
  uint8_t* scratch;
  bool keep_bf16;
  bool paired;
};

// The row-layout codes and scales of `m` [n, k] in `scratch` (group 32),
// tiled into `arena` at `*at`; returns the int4 view. `keep_bf16`: `m` is
// overwritten with the dequantized values (in the matrix's row order) and
// kept as the view's w4_bf16.
absl::StatusOr<DeviceMatrix> TileInto(const DeviceMatrix& m, int64_t n, int k, const TileTarget& to,
                                      cudaStream_t stream) {
  uint8_t* const arena = to.arena;
  int64_t* const at = to.at;
  uint8_t* const scratch = to.scratch;
  const bool paired = to.paired && n % 16 == 0;
  const auto* row_scales = reinterpret_cast<const __half*>(scratch + RowPackedBytes(n, k));
  uint8_t* codes = arena + *at;
  auto* scales = reinterpret_cast<__half*>(arena + *at + Align(kernels::W4TiledCodeBytes(n, k)));
  *at += TiledBytes(n, k);
  GEMMA_KERNEL_RETURN_IF_ERROR(
      kernels::LaunchTileW4({scratch, row_scales, kGroup, codes, scales, n, k, paired}, stream));
  DeviceMatrix q = DeviceMatrix::Int4(codes, scales, kGroup);
  q.w4_paired = paired;
  if (to.keep_bf16) {
    auto* bf16 = const_cast<__nv_bfloat16*>(m.bf16());
    GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchDequantizeW4({codes, scales, bf16, n, k, paired}, stream));
    q.w4_bf16 = bf16;
  }
  return q;
}

// Quantizes the bf16 matrix `m` [n, k] into the row-layout `scratch`, then TileInto.
absl::StatusOr<DeviceMatrix> QuantizeInto(const DeviceMatrix& m, int64_t n, int k, const TileTarget& to,
                                          cudaStream_t stream) {
  uint8_t* const scratch = to.scratch;
  if (m.fp8() || m.int4()) return absl::InternalError("int4: a matrix is not bf16");
  if (k % kGroup != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--weights int4: a [", n, ", ", k,
                                                   "] matrix: Q4_0 needs the input dimension a multiple of 32"));
  }
  auto* row_scales = reinterpret_cast<__half*>(scratch + RowPackedBytes(n, k));
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchQuantizeQ4_0({m.bf16(), nullptr, scratch, row_scales, n, k}, stream));
  return TileInto(m, n, k, to, stream);
}

// A W4A16 checkpoint's matrix `parts` (fused by rows: q|k|v, gate|up; every
// part pack-quantized, as BindWeights checks): each part's Q4_0 blocks in the
// row layout into `scratch` at its rows, then TileInto.
absl::StatusOr<DeviceMatrix> UploadPacked(const DeviceMatrix& m, int64_t n, int k,
                                          std::span<const PackedInt4Ref* const> parts, const TileTarget& to,
                                          cudaStream_t stream) {
  uint8_t* const scratch = to.scratch;
  auto* row_scales = reinterpret_cast<__half*>(scratch + RowPackedBytes(n, k));
  const int64_t row_bytes = kernels::W4PaddedK(k) / 2, row_groups = kernels::W4PaddedK(k) / kGroup;
  int64_t row = 0;
  for (const PackedInt4Ref* part : parts) {
    auto device = ReadInt4ForDevice(*part);
    if (!device.ok()) return device.status();
    const quant::W4DeviceMatrix& d = *device;
    if (d.cols != k || d.group != kGroup || row + d.rows > n) {
      return absl::InternalError("int4: a pack-quantized part does not fit its fused matrix");
    }
    // In stream order before the tiling; from pageable memory the call
    // returns once `d` has been staged, so it may go out of scope.
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(scratch + row * row_bytes, d.packed.data(), d.packed.size(),
                                               cudaMemcpyHostToDevice, stream));
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(row_scales + row * row_groups, d.scales.data(),
                                               d.scales.size() * 2, cudaMemcpyHostToDevice, stream));
    row += d.rows;
  }
  if (row != n) return absl::InternalError("int4: the pack-quantized parts do not fill their fused matrix");
  return TileInto(m, n, k, to, stream);
}

}  // namespace

absl::Status DeviceWeights::QuantizeLinearsInt4(const ModelConfig& c, const ModelWeights* checkpoint, Int4Copy copy,
                                                bool pair_gate_up, cudaStream_t stream) {
  if (int4_.get() != nullptr) return absl::OkStatus();
  struct Mat {
    DeviceMatrix* m;
    int64_t n;
    int k;
    std::vector<const PackedInt4Ref*> parts;  // a W4A16 checkpoint's packed sources, else empty
    bool gate_up = false;                     // tiled paired (TileTarget::paired)
    int64_t deferred = -1;                    // its start in the deferred space (FillDeferred), or -1
  };
  const bool w4a16 = checkpoint != nullptr && c.int4_checkpoint.has_value();
  // The packed parts of a fused matrix (none for a float checkpoint).
  auto packed = [](std::initializer_list<const PackedInt4Ref*> refs) {
    std::vector<const PackedInt4Ref*> out;
    for (const PackedInt4Ref* r : refs) {
      if (r->present()) out.push_back(r);
    }
    return out;
  };
  std::vector<Mat> mats;
  int ignored = 0;
  const LayerWeights none;
  for (int l = 0; l < c.num_layers; ++l) {
    DeviceLayer& d = layers_[l];
    const int q_width = c.num_heads * c.layers[l].head_dim;
    const LayerWeights& lw = checkpoint ? checkpoint->layers[l] : none;
    Mat layer[] = {
        {&d.qkv, d.qkv_rows, c.hidden_size, packed({&lw.q_proj_int4, &lw.k_proj_int4, &lw.v_proj_int4})},
        {&d.o_proj, c.hidden_size, q_width, packed({&lw.o_proj_int4})},
        {&d.gate_up, 2 * int64_t{c.intermediate_size}, c.hidden_size, packed({&lw.gate_proj_int4, &lw.up_proj_int4}),
         pair_gate_up},
        {&d.down_proj, c.hidden_size, c.intermediate_size, packed({&lw.down_proj_int4})}};
    for (int i = 0; i < 4; ++i) {
      Mat& m = layer[i];
      m.deferred = deferred_at_.empty() ? -1 : deferred_at_[l][i];
      // A W4A16 checkpoint's float matrices are those its ignore list names: bf16.
      if (w4a16 && m.parts.empty()) {
        ++ignored;
        continue;
      }
      mats.push_back(std::move(m));
    }
  }
  int64_t most_deferred = 0;  // elements of the largest deferred matrix
  for (const Mat& m : mats) {
    if (m.deferred >= 0) most_deferred = std::max(most_deferred, m.n * m.k);
  }
  if (most_deferred > 0 && copy == Int4Copy::kBf16) {
    return absl::InternalError("int4: the layer matrices were loaded deferred: no bf16 copy can be kept");
  }
  // Ignored matrices live in the bf16 arena: it stays.
  const bool keep = copy == Int4Copy::kBf16 || ignored > 0;
  // The fp8 copy is made from the dequantized values the bf16 matrices are
  // overwritten with (TileInto's keep_bf16), one arena: codes, then row scales.
  const bool fp8_copy = copy == Int4Copy::kFp8;
  const bool dequantize = copy != Int4Copy::kNone;
  int64_t fp8_codes = 0, fp8_rows = 0;
  for (const Mat& m : mats) {
    fp8_codes += Align(m.n * m.k);
    fp8_rows += m.n;
  }
  if (fp8_copy && !mats.empty()) GEMMA_STATUS_RETURN_IF_ERROR(int4_fp8_.Allocate(fp8_codes + fp8_rows * 4));
  int64_t total = 0, most = 0;
  for (const Mat& m : mats) {
    total += TiledBytes(m.n, m.k);
    most = std::max(most, RowPackedBytes(m.n, m.k) + RowScaleBytes(m.n, m.k));
  }
  if (total > 0) GEMMA_STATUS_RETURN_IF_ERROR(int4_.Allocate(total));
  if (!mats.empty()) {
    DeviceBuffer scratch;
    GEMMA_STATUS_RETURN_IF_ERROR(scratch.Allocate(most));
    // A deferred matrix is read or drawn here, one at a time, in stream
    // order after the previous one's quantization and copy have read it.
    DeviceBuffer deferred;
    if (most_deferred > 0) GEMMA_STATUS_RETURN_IF_ERROR(deferred.Allocate(most_deferred * 2));
    int64_t at = 0, fp8_at = 0, scale_at = 0;
    for (const Mat& m : mats) {
      const TileTarget to{int4_.get<uint8_t>(), &at, scratch.get<uint8_t>(), dequantize, m.gate_up};
      DeviceMatrix source = *m.m;
      if (m.deferred >= 0) {
        GEMMA_STATUS_RETURN_IF_ERROR(
            FillDeferred(m.deferred, m.n * m.k, deferred.get<__nv_bfloat16>(), stream));
        source = DeviceMatrix(deferred.get<__nv_bfloat16>());
      }
      auto q = m.parts.empty() ? QuantizeInto(source, m.n, m.k, to, stream)
                               : UploadPacked(source, m.n, m.k, m.parts, to, stream);
      if (!q.ok()) return q.status();
      if (fp8_copy) {
        auto* codes = int4_fp8_.get<uint8_t>() + fp8_at;
        auto* scales = reinterpret_cast<float*>(int4_fp8_.get<uint8_t>() + fp8_codes) + scale_at;
        GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchQuantizeRowsFp8({q->w4_bf16, codes, scales, m.n, m.k}, stream));
        q->w4_bf16 = nullptr;  // freed below with the bf16 arena
        q->w4_fp8 = codes;
        q->w4_fp8_scale = scales;
        q->w4_fp8_wgmma = MakeWgmmaMap(codes, static_cast<int>(m.n), m.k);
        fp8_at += Align(m.n * m.k);
        scale_at += m.n;
      }
      *m.m = *q;
    }
    GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    deferred_staging_.reset();
  }
  dtype_ = WeightDType::kINT4;
  if (w4a16) {
    spdlog::info("cuda: {} linear matrices int4 from the W4A16 checkpoint (codes and scales as they are): {:.2f} GB; "
                 "{} kept bf16 (quantization_config.ignore)",
                 mats.size(), total / 1e9, ignored);
  }
  if (fp8_copy) {
    spdlog::info("cuda: int4 matrices' fp8 copies for large passes ({:.2f} GB; GEMMA_INT4_FP8_COPY=0: a bf16 copy)",
                 int4_fp8_.bytes() / 1e9);
    if (keep) return absl::OkStatus();  // an ignored matrix lives in the bf16 arena
  }
  if (keep && !fp8_copy) {
    spdlog::info("cuda: {} linear matrices quantized to int4 (Q4_0, W4A16): {:.2f} GB, their bf16 copies kept "
                 "for large passes (GEMMA_INT4_BF16_COPY=0 frees {:.2f} GB)",
                 mats.size(), total / 1e9, (bf16_.bytes() - static_cast<size_t>(vocab_) * hidden_ * 2) / 1e9);
    return absl::OkStatus();
  }
  // Only the embedding stays in bf16: move it to its own buffer and free the
  // rest of the bf16 arena (the layers' bf16 matrices).
  const int64_t freed = static_cast<int64_t>(bf16_.bytes());
  DeviceBuffer embed;
  GEMMA_STATUS_RETURN_IF_ERROR(embed.Allocate(static_cast<size_t>(vocab_) * hidden_ * 2));
  GEMMA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(embed.get<void>(), embed_, embed.bytes(), cudaMemcpyDeviceToDevice, stream));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  bf16_ = std::move(embed);
  embed_ = bf16_.get<__nv_bfloat16>();
  if (most_deferred > 0) {
    spdlog::info("cuda: {} linear matrices quantized to int4 (Q4_0, W4A16): {:.2f} GB; each read in bf16 only as "
                 "its turn came ({:.2f} GB at most)",
                 mats.size(), total / 1e9, most_deferred * 2 / 1e9);
  } else {
    spdlog::info("cuda: {} linear matrices quantized to int4 (Q4_0, W4A16): {:.2f} GB; bf16 matrices freed: {:.2f} GB",
                 mats.size(), total / 1e9, (freed - static_cast<int64_t>(bf16_.bytes())) / 1e9);
  }
  return absl::OkStatus();
}

absl::Status DeviceWeights::QuantizeLmHeadInt4(cudaStream_t stream) {
  if (lm_head_int4_.get() != nullptr) return absl::OkStatus();
  GEMMA_STATUS_RETURN_IF_ERROR(lm_head_int4_.Allocate(TiledBytes(vocab_, hidden_)));
  DeviceBuffer scratch;
  GEMMA_STATUS_RETURN_IF_ERROR(scratch.Allocate(RowPackedBytes(vocab_, hidden_) + RowScaleBytes(vocab_, hidden_)));
  int64_t at = 0;
  // The embedding lookup keeps the checkpoint's values.
  const TileTarget to{lm_head_int4_.get<uint8_t>(), &at, scratch.get<uint8_t>(), /*keep_bf16=*/false,
                      /*paired=*/false};
  auto q = QuantizeInto(DeviceMatrix(embed_), vocab_, hidden_, to, stream);
  if (!q.ok()) return q.status();
  lm_head_int4_matrix_ = *q;
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  spdlog::info("cuda: LM head quantized to int4 ({:.2f} GB next to the bf16 embedding)", lm_head_int4_.bytes() / 1e9);
  return absl::OkStatus();
}

}  // namespace gemma::cuda
