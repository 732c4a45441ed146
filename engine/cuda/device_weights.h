// The model's weights on the device, in the layout the CUDA forward reads:
// bf16 matrices (nn.Linear [out, in]), fused where one pass reads them
// together, and fp32 norm vectors and layer scalars.
//
//   qkv      [(heads + kv_heads * (k_eq_v ? 1 : 2)) * D, H]  q | k | v rows
//   gate_up  [2 * I, H]                                      gate | up rows
//
// Built once, from a checkpoint (f16/f32 converted to bf16) or from a
// deterministic device-side random init at the config's real shape.
// Thread-safety: immutable after construction.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_util.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace gemma::cuda {

struct DeviceLayer {
  __nv_bfloat16* qkv = nullptr;
  int qkv_rows = 0;
  __nv_bfloat16* o_proj = nullptr;     // [H, heads * D]
  __nv_bfloat16* gate_up = nullptr;    // [2I, H]
  __nv_bfloat16* down_proj = nullptr;  // [H, I]
  float* q_norm = nullptr;             // [D]
  float* k_norm = nullptr;             // [D]
  float* input_norm = nullptr;         // [H]
  float* post_attention_norm = nullptr;
  float* pre_feedforward_norm = nullptr;
  float* post_feedforward_norm = nullptr;
  float* layer_scalar = nullptr;       // [1]
};

class DeviceWeights {
 public:
  // Uploads a bound checkpoint; logs progress (GB done, rate, ETA).
  static absl::StatusOr<std::unique_ptr<DeviceWeights>> Upload(const ModelConfig& config,
                                                               const ModelWeights& weights,
                                                               cudaStream_t stream);
  // Deterministic random weights: matrices ~ N(0, 0.02)-like, norms ~ 1,
  // layer scalars ~ 1, generated on the device.
  static absl::StatusOr<std::unique_ptr<DeviceWeights>> Random(const ModelConfig& config,
                                                               uint64_t seed, cudaStream_t stream);

  const __nv_bfloat16* embed() const { return embed_; }  // [V, H], also the lm_head
  const float* final_norm() const { return final_norm_; }
  const std::vector<DeviceLayer>& layers() const { return layers_; }
  int64_t bytes() const { return static_cast<int64_t>(bf16_.bytes() + f32_.bytes()); }

 private:
  // One source tensor's place in a device arena (offsets in elements).
  struct Piece {
    bool f32 = false;            // fp32 arena (norms, scalars) or bf16 arena
    int64_t offset = 0;
    int64_t count = 0;
    const TensorRef* source = nullptr;  // nullptr for random weights
    float mean = 0.0f;           // random init
    float stddev = 0.0f;
  };
  class Planner;
  struct LayerOffsets;
  absl::Status Plan(const ModelConfig& config, const ModelWeights* weights);
  static LayerOffsets PlanLayer(Planner& planner, const ModelConfig& config, int layer,
                                const LayerWeights* weights);
  void BindLayer(const ModelConfig& config, int layer, const LayerOffsets& offsets);
  absl::Status CopyPieces(cudaStream_t stream);
  absl::Status FillRandom(uint64_t seed, cudaStream_t stream);

  DeviceBuffer bf16_;  // every matrix
  DeviceBuffer f32_;   // norms and scalars
  __nv_bfloat16* embed_ = nullptr;
  float* final_norm_ = nullptr;
  std::vector<DeviceLayer> layers_;
  std::vector<Piece> pieces_;
};

}  // namespace gemma::cuda
