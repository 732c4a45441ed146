// The model's weights on the device, in the layout the CUDA forward reads:
// matrices (nn.Linear [out, in]), fused where one pass reads them together,
// and fp32 norm vectors and layer scalars. The linear layers' matrices are
// bf16, or FP8 E4M3 with one fp32 scale per output row (--weights fp8); the
// embedding is always bf16, the LM head it is tied to optionally an E4M3 copy.
//
//   qkv      [(heads + kv_heads * (k_eq_v ? 1 : 2)) * D, H]  q | k | v rows
//   gate_up  [2 * I, H]                                      gate | up rows
//
// fp8 matrices (and the fp8 LM head) also get the TMA descriptor the wgmma
// FP8 linear reads (DeviceMatrix::wgmma), built on the host after upload; a
// descriptor that cannot be built leaves the pointer null (cuBLASLt only).
//
// Built once, from a checkpoint (f16/f32 converted to bf16, then quantized on
// the device row by row for fp8) or from a deterministic device-side random
// init at the config's real shape (quantized the same way).
// Thread-safety: immutable after construction.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/core/backend_options.h"
#include "engine/cuda/common/cuda_util.h"
#include "engine/cuda/common/device_matrix.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "kernels/gemv/wgmma_fp8.h"
#include "kernels/init/random_init.h"

namespace gemma::cuda {

struct DeviceLayer {
  DeviceMatrix qkv;
  int qkv_rows = 0;
  DeviceMatrix o_proj;                 // [H, heads * D]
  DeviceMatrix gate_up;                // [2I, H]
  DeviceMatrix down_proj;              // [H, I]
  float* q_norm = nullptr;             // [D]
  float* k_norm = nullptr;             // [D]
  float* input_norm = nullptr;         // [H]
  float* post_attention_norm = nullptr;
  float* pre_feedforward_norm = nullptr;
  float* post_feedforward_norm = nullptr;
  float* layer_scalar = nullptr;       // [1]
};

// What --weights int4 keeps beside the 4-bit matrices for passes of more
// rows than the W4A16 kernel serves well.
enum class Int4Copy { kNone, kBf16, kFp8 };

class DeviceWeights {
 public:
  // Uploads a bound checkpoint; logs progress (GB done, rate, ETA).
  // `defer_int4_linears` (int4 only): the layer matrices QuantizeLinearsInt4
  // will quantize get no bf16 place here; it reads each from the checkpoint
  // when its turn comes (which must then still be open), so the load's peak
  // is the int4 arena, its copy and the embedding, not every matrix in bf16
  // (the 31B: ~50 GB instead of ~107). Not with Int4Copy::kBf16, which keeps
  // the bf16 matrices.
  static absl::StatusOr<std::unique_ptr<DeviceWeights>> Upload(const ModelConfig& config,
                                                               const ModelWeights& weights,
                                                               cudaStream_t stream,
                                                               WeightDType dtype = WeightDType::kBF16,
                                                               bool defer_int4_linears = false);
  // Deterministic random weights: matrices ~ N(0, 0.02)-like, norms ~ 1,
  // layer scalars ~ 1, generated on the device. `defer_int4_linears` as in
  // Upload: the deferred matrices are drawn when quantized, with the same
  // values.
  static absl::StatusOr<std::unique_ptr<DeviceWeights>> Random(const ModelConfig& config,
                                                               uint64_t seed, cudaStream_t stream,
                                                               WeightDType dtype = WeightDType::kBF16,
                                                               bool defer_int4_linears = false);
  ~DeviceWeights();

  const __nv_bfloat16* embed() const { return embed_; }  // [V, H], the lookup table (and bf16 LM head)
  // The LM head: the embedding, or its E4M3 copy after QuantizeLmHead().
  DeviceMatrix lm_head() const;
  // Makes an E4M3 copy of the embedding (per-row scales) for the LM head:
  // halves the largest single matrix a decode step streams (1.4 of 2.8 GB
  // at the 31B shape). The embedding lookup keeps reading bf16.
  absl::Status QuantizeLmHead(cudaStream_t stream);
  // int4 weights (int4_weights.cc): every layer matrix, in bf16 (loaded, or
  // read now into a scratch when the load deferred it), gets
  // a Q4_0 copy in the tiled W4A16 layout and the layers point at it; a W4A16
  // `checkpoint`'s pack-quantized matrices (the one Upload read, still open)
  // go into it as they are, and those its ignore list names stay bf16. The
  // bf16 matrices stay as the dequantized copy (Int4Copy::kBf16: the switch
  // GEMMA_INT4_BF16_COPY), or give an E4M3 copy of the dequantized values
  // (kFp8: GEMMA_INT4_FP8_COPY), or neither; without a bf16 copy they are
  // freed (the embedding moves to its own buffer; kept when an ignored matrix
  // lives there). QuantizeLmHeadInt4: the same for the LM head (a copy of the
  // embedding, no copy).
  // `pair_gate_up`: each fused gate|up matrix in the paired tiling (where
  // its rows are a multiple of 16), so the W4A16 kernel can write the gelu
  // gate (LinearArgs::gelu_gate).
  absl::Status QuantizeLinearsInt4(const ModelConfig& config, const ModelWeights* checkpoint, Int4Copy copy,
                                   bool pair_gate_up, cudaStream_t stream);
  absl::Status QuantizeLmHeadInt4(cudaStream_t stream);
  const float* final_norm() const { return final_norm_; }
  const std::vector<DeviceLayer>& layers() const { return layers_; }
  WeightDType dtype() const { return dtype_; }
  int64_t bytes() const {
    return static_cast<int64_t>(bf16_.bytes() + f32_.bytes() + fp8_.bytes() + lm_head_fp8_.bytes() + int4_.bytes() +
                                int4_fp8_.bytes() +
                                lm_head_int4_.bytes() +
                                lm_head_scale_.bytes());
  }

 private:
  // One source tensor's place in a device arena (offsets in elements).
  // kDeferred: a layer matrix of an int4 load that has no device place
  // until QuantizeLinearsInt4 reads it into a scratch (defer_int4_linears).
  enum class Arena { kBf16, kF32, kFp8, kDeferred };
  struct Piece {
    Arena arena = Arena::kBf16;
    int64_t offset = 0;
    int64_t count = 0;
    int cols = 0;                // fp8: row length (rows are quantized whole)
    int64_t scale_offset = 0;    // fp8: f32 arena offset of the row scales
    const TensorRef* source = nullptr;  // nullptr for random weights
    const TensorRef* scale_source = nullptr;  // fp8 from an FP8 checkpoint: its row scales
    float mean = 0.0f;           // random init
    float stddev = 0.0f;
  };
  class Planner;
  struct MatrixOffsets;
  struct LayerOffsets;
  absl::Status Plan(const ModelConfig& config, const ModelWeights* weights);
  static LayerOffsets PlanLayer(Planner& planner, const ModelConfig& config, int layer,
                                const LayerWeights* weights, bool defer);
  void BindLayer(const ModelConfig& config, int layer, const LayerOffsets& offsets);
  DeviceMatrix BindMatrix(const MatrixOffsets& o) const;
  absl::Status CopyPieces(cudaStream_t stream);
  struct Staging;
  absl::Status CopyFp8Piece(const Piece& p, Staging& staging, cudaStream_t stream);
  absl::Status FillRandom(uint64_t seed, cudaStream_t stream);
  static kernels::RandomFillParams RandomPiece(const Piece& p, size_t i, uint64_t seed);
  // Writes the deferred pieces of [begin, begin + count) of the deferred
  // space (one matrix) into dst as bf16: drawn as FillRandom would have, or
  // read from the checkpoint (pack-quantized pieces are left alone).
  absl::Status FillDeferred(int64_t begin, int64_t count, __nv_bfloat16* dst, cudaStream_t stream);
  // Converts and uploads a piece's elements through the staging buffers to dst.
  absl::Status UploadConverted(const Piece& p, void* dst, bool to_f32, Staging& staging, cudaStream_t stream);
  int64_t MaxFp8PieceCount() const;
  // Gives every fp8 layer matrix its wgmma TMA descriptor (host only).
  void AttachWgmmaMaps(const ModelConfig& config);
  // A descriptor of w [n, k] owned by this object; null when it cannot be
  // built (the first failure is logged: start-up goes on with cuBLASLt).
  const kernels::WgmmaFp8Weights* MakeWgmmaMap(const uint8_t* w, int n, int k);

  struct StagingFree {
    void operator()(Staging* s) const;
  };
  // Deferred layer matrices (Arena::kDeferred): where each layer's qkv, o,
  // gate|up and down start in the deferred space (-1: not deferred), and
  // what FillDeferred needs until QuantizeLinearsInt4 is done.
  bool defer_linears_ = false;
  std::vector<std::array<int64_t, 4>> deferred_at_;
  bool random_ = false;
  uint64_t random_seed_ = 0;
  std::unique_ptr<Staging, StagingFree> deferred_staging_;
  DeviceBuffer bf16_;  // bf16 matrices (all of them, or the embedding only)
  DeviceBuffer f32_;   // norms, scalars and fp8 row scales
  DeviceBuffer fp8_;   // fp8 matrices (E4M3 bits)
  DeviceBuffer lm_head_fp8_;    // [V, H] E4M3, when QuantizeLmHead() ran
  DeviceBuffer int4_;           // the layers' int4 codes and scales (QuantizeLinearsInt4)
  DeviceBuffer int4_fp8_;       // their E4M3 copies and row scales (Int4Copy::kFp8)
  DeviceBuffer lm_head_int4_;   // the LM head's (QuantizeLmHeadInt4)
  DeviceMatrix lm_head_int4_matrix_;
  DeviceBuffer lm_head_scale_;  // [V] fp32
  const kernels::WgmmaFp8Weights* lm_head_wgmma_ = nullptr;
  // Heap-held so DeviceMatrix's pointers stay valid as the list grows.
  std::vector<std::unique_ptr<kernels::WgmmaFp8Weights>> wgmma_maps_;
  bool wgmma_map_failed_ = false;
  WeightDType dtype_ = WeightDType::kBF16;
  __nv_bfloat16* embed_ = nullptr;
  int vocab_ = 0, hidden_ = 0;  // the embedding's shape
  float* final_norm_ = nullptr;
  std::vector<DeviceLayer> layers_;
  std::vector<Piece> pieces_;
};

}  // namespace gemma::cuda
