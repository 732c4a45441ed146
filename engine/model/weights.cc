#include "engine/model/weights.h"

#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "engine/model/int4_checkpoint.h"
#include "engine/model/status_macros.h"
#include "engine/model/str_cat.h"

namespace gemma {
namespace {

// safetensors stores little-endian; we read elements with memcpy.
static_assert(std::endian::native == std::endian::little, "big-endian hosts unsupported");

// Tensors of the multimodal checkpoint that the text decoder never reads.
constexpr std::string_view kSkippedPrefixes[] = {"model.vision_tower.", "model.embed_vision.",
                                                 "model.audio_tower.", "model.embed_audio."};

std::string ShapeString(const std::vector<int64_t>& shape) {
  return model_internal::Cat("[", absl::StrJoin(shape, ", "), "]");
}

bool IsFloatDType(DType d) { return d == DType::kBF16 || d == DType::kF16 || d == DType::kF32; }

// Looks tensors up under the decoder prefix and remembers which were used,
// so leftovers (e.g. a v_proj on a k_eq_v layer) can be reported.
class Binder {
 public:
  Binder(const Checkpoint& checkpoint, std::string prefix, const quant::Int4CheckpointConfig* int4)
      : checkpoint_(checkpoint), prefix_(std::move(prefix)), int4_(int4) {}

  absl::StatusOr<TensorRef> Bind(std::string_view suffix, std::vector<int64_t> shape,
                                 bool allow_fp8 = false) {
    const std::string name = model_internal::Cat(prefix_, suffix);
    const TensorRef* ref = checkpoint_.Find(name);
    if (ref == nullptr) {
      return absl::NotFoundError(model_internal::Cat("tensor ", name,
                                                     " is missing from the checkpoint",
                                                     " (expected shape ", ShapeString(shape), ")"));
    }
    const bool fp8 = allow_fp8 && ref->info->dtype == DType::kF8E4M3;
    if (!fp8 && !IsFloatDType(ref->info->dtype)) {
      return absl::InvalidArgumentError(
          model_internal::Cat("tensor ", name, " in ", ref->file->path(), ": dtype ",
                              ref->info->dtype_name, ", expected BF16, F16 or F32"));
    }
    if (ref->info->shape != shape) {
      return absl::InvalidArgumentError(
          model_internal::Cat("tensor ", name, " in ", ref->file->path(), ": expected shape ",
                              ShapeString(shape), ", got ", ShapeString(ref->info->shape)));
    }
    bound_.insert(name);
    return *ref;
  }

  // A linear layer's `<suffix>` ("...proj.weight", [out, in]): float, or
  // F8_E4M3 with `<suffix>_scale` bound into *scale. A static activation
  // scale (`input_scale`) is accepted and ignored: the CUDA backend quantizes
  // activations per token at run time.
  // In a W4A16 checkpoint the layer is pack-quantized (bound into *packed,
  // the float TensorRef returned empty) unless quantization_config.ignore
  // names it.
  absl::StatusOr<TensorRef> BindLinear(std::string_view suffix, std::vector<int64_t> shape,
                                       TensorRef* scale, PackedInt4Ref* packed) {
    const std::string module = model_internal::Cat(prefix_, suffix.substr(0, suffix.size() - 7));  // less ".weight"
    const bool has_packed = checkpoint_.Find(module + ".weight_packed") != nullptr;
    if (int4_ == nullptr && has_packed) {
      return absl::InvalidArgumentError(model_internal::Cat(
          "tensor ", module, ".weight_packed is pack-quantized but config.json has no compressed-tensors "
          "quantization_config"));
    }
    if (int4_ != nullptr && !quant::IsIgnored(*int4_, module)) {
      std::vector<std::string> names;
      MODEL_ASSIGN_OR_RETURN(*packed,
                             BindPackedInt4(checkpoint_, module, shape[0], shape[1], int4_->group_size, &names));
      bound_.insert(names.begin(), names.end());
      has_int4_ = true;
      return TensorRef{};
    }
    if (has_packed) {
      return absl::InvalidArgumentError(model_internal::Cat(
          "tensor ", module, ".weight_packed: the module is in quantization_config.ignore, so its weight must be "
          "unquantized (", module, ".weight)"));
    }
    MODEL_ASSIGN_OR_RETURN(TensorRef w, Bind(suffix, shape, /*allow_fp8=*/int4_ == nullptr));
    if (w.info->dtype != DType::kF8E4M3) return w;
    const std::string scale_suffix = model_internal::Cat(suffix, "_scale");
    const std::string name = model_internal::Cat(prefix_, scale_suffix);
    const std::string expected = model_internal::Cat("[", shape[0], ", 1] (per output channel) or [] (per tensor)");
    const TensorRef* ref = checkpoint_.Find(name);
    if (ref == nullptr) {
      return absl::NotFoundError(model_internal::Cat("tensor ", prefix_, suffix, " is FP8 (F8_E4M3) but its scale ",
                                                     name, " is missing (expected shape ", expected, ")"));
    }
    if (!IsFloatDType(ref->info->dtype)) {
      return absl::InvalidArgumentError(model_internal::Cat("tensor ", name, " in ", ref->file->path(), ": dtype ",
                                                            ref->info->dtype_name, ", expected F32, BF16 or F16"));
    }
    const std::vector<int64_t>& s = ref->info->shape;
    const bool per_channel = s == std::vector<int64_t>{shape[0], 1} || s == std::vector<int64_t>{shape[0]};
    const bool per_tensor = s.empty() || s == std::vector<int64_t>{1};
    if (!per_channel && !per_tensor) {
      return absl::InvalidArgumentError(model_internal::Cat("tensor ", name, " in ", ref->file->path(),
                                                            ": expected shape ", expected, ", got ",
                                                            ShapeString(s)));
    }
    bound_.insert(name);
    const std::string input_scale = model_internal::Cat(
        prefix_, suffix.substr(0, suffix.size() - std::string_view("weight").size()), "input_scale");
    if (checkpoint_.Find(input_scale) != nullptr) bound_.insert(input_scale);
    *scale = *ref;
    has_fp8_ = true;
    return w;
  }
  bool has_fp8() const { return has_fp8_; }
  bool has_int4() const { return has_int4_; }

  absl::Status CheckNoUnexpected() const {
    for (const auto& [name, ref] : checkpoint_.tensors()) {
      if (bound_.count(name) != 0 || IsSkipped(name)) continue;
      if (name.starts_with(prefix_) || name == "lm_head.weight") {
        return absl::InvalidArgumentError(
            model_internal::Cat("unexpected tensor ", name, " in ", ref.file->path(),
                                " (not part of the decoder this config describes; lm_head is tied, "
                                "k_eq_v layers have no v_proj)"));
      }
    }
    return absl::OkStatus();
  }

 private:
  static bool IsSkipped(std::string_view name) {
    for (std::string_view p : kSkippedPrefixes) {
      if (name.starts_with(p)) return true;
    }
    return false;
  }

  const Checkpoint& checkpoint_;
  std::string prefix_;
  const quant::Int4CheckpointConfig* int4_;  // nullptr: not a W4A16 checkpoint
  std::set<std::string> bound_;
  bool has_fp8_ = false;
  bool has_int4_ = false;
};

// q/k/v (and gate/up) are multiplied as one fused matrix, so they must be all
// pack-quantized or all float (vLLM requires the same of fused layers).
absl::Status CheckFusedScheme(const std::string& where,
                              std::initializer_list<std::pair<const char*, const PackedInt4Ref*>> parts) {
  const bool first = parts.begin()->second->present();
  for (const auto& [name, ref] : parts) {
    if (ref->present() == first) continue;
    return absl::InvalidArgumentError(model_internal::Cat(
        where, parts.begin()->first, " is ", first ? "int4" : "unquantized", " but ", where, name, " is ",
        first ? "unquantized" : "int4", ": they run as one fused matrix, so quantization_config.ignore must name all "
        "or none of them"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LayerWeights> BindLayer(const ModelConfig& config, int index, Binder& binder) {
  const LayerSpec& spec = config.layers[index];
  const int64_t h = config.hidden_size, i = config.intermediate_size, d = spec.head_dim;
  const int64_t q = int64_t{config.num_heads} * d, kv = int64_t{spec.num_kv_heads} * d;
  const std::string p = model_internal::Cat("layers.", index, ".");
  LayerWeights w;
  MODEL_ASSIGN_OR_RETURN(w.q_proj, binder.BindLinear(p + "self_attn.q_proj.weight", {q, h}, &w.q_proj_scale,
                                                     &w.q_proj_int4));
  MODEL_ASSIGN_OR_RETURN(w.k_proj, binder.BindLinear(p + "self_attn.k_proj.weight", {kv, h}, &w.k_proj_scale,
                                                     &w.k_proj_int4));
  if (!spec.k_eq_v) {
    MODEL_ASSIGN_OR_RETURN(w.v_proj, binder.BindLinear(p + "self_attn.v_proj.weight", {kv, h}, &w.v_proj_scale,
                                                     &w.v_proj_int4));
  }
  MODEL_ASSIGN_OR_RETURN(w.o_proj, binder.BindLinear(p + "self_attn.o_proj.weight", {h, q}, &w.o_proj_scale,
                                                     &w.o_proj_int4));
  MODEL_ASSIGN_OR_RETURN(w.q_norm, binder.Bind(p + "self_attn.q_norm.weight", {d}));
  MODEL_ASSIGN_OR_RETURN(w.k_norm, binder.Bind(p + "self_attn.k_norm.weight", {d}));
  MODEL_ASSIGN_OR_RETURN(w.input_layernorm, binder.Bind(p + "input_layernorm.weight", {h}));
  MODEL_ASSIGN_OR_RETURN(w.post_attention_layernorm,
                         binder.Bind(p + "post_attention_layernorm.weight", {h}));
  MODEL_ASSIGN_OR_RETURN(w.pre_feedforward_layernorm,
                         binder.Bind(p + "pre_feedforward_layernorm.weight", {h}));
  MODEL_ASSIGN_OR_RETURN(w.post_feedforward_layernorm,
                         binder.Bind(p + "post_feedforward_layernorm.weight", {h}));
  MODEL_ASSIGN_OR_RETURN(w.gate_proj, binder.BindLinear(p + "mlp.gate_proj.weight", {i, h}, &w.gate_proj_scale,
                                                     &w.gate_proj_int4));
  MODEL_ASSIGN_OR_RETURN(w.up_proj, binder.BindLinear(p + "mlp.up_proj.weight", {i, h}, &w.up_proj_scale,
                                                     &w.up_proj_int4));
  MODEL_ASSIGN_OR_RETURN(w.down_proj, binder.BindLinear(p + "mlp.down_proj.weight", {h, i}, &w.down_proj_scale,
                                                     &w.down_proj_int4));
  MODEL_ASSIGN_OR_RETURN(w.layer_scalar, binder.Bind(p + "layer_scalar", {1}));
  const std::string at = model_internal::Cat(config.tensor_prefix(), p);
  if (spec.k_eq_v) {
    MODEL_RETURN_IF_ERROR(
        CheckFusedScheme(at, {{"self_attn.q_proj", &w.q_proj_int4}, {"self_attn.k_proj", &w.k_proj_int4}}));
  } else {
    MODEL_RETURN_IF_ERROR(CheckFusedScheme(at, {{"self_attn.q_proj", &w.q_proj_int4},
                                                {"self_attn.k_proj", &w.k_proj_int4},
                                                {"self_attn.v_proj", &w.v_proj_int4}}));
  }
  MODEL_RETURN_IF_ERROR(CheckFusedScheme(at, {{"mlp.gate_proj", &w.gate_proj_int4}, {"mlp.up_proj", &w.up_proj_int4}}));
  return w;
}

uint16_t LoadU16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

absl::StatusOr<ModelWeights> BindWeights(const ModelConfig& config, const Checkpoint& checkpoint) {
  Binder binder(checkpoint, config.tensor_prefix(),
                config.int4_checkpoint.has_value() ? &*config.int4_checkpoint : nullptr);
  ModelWeights weights;
  const int64_t h = config.hidden_size;
  MODEL_ASSIGN_OR_RETURN(weights.embed_tokens,
                         binder.Bind("embed_tokens.weight", {config.vocab_size, h}));
  MODEL_ASSIGN_OR_RETURN(weights.final_norm, binder.Bind("norm.weight", {h}));
  for (int l = 0; l < config.num_layers; ++l) {
    MODEL_ASSIGN_OR_RETURN(LayerWeights layer, BindLayer(config, l, binder));
    weights.layers.push_back(layer);
  }
  MODEL_RETURN_IF_ERROR(binder.CheckNoUnexpected());
  weights.has_fp8 = binder.has_fp8();
  weights.has_int4 = binder.has_int4();
  return weights;
}

float Bf16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t FloatToBf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  // Rounding would carry a NaN's payload into the exponent; keep it a quiet NaN.
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040);
  const uint32_t round_bias = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + round_bias) >> 16);
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1F;
  const uint32_t mantissa = bits & 0x3FF;
  if (exponent == 0x1F) {  // inf / NaN
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  }
  if (exponent == 0) {  // zero / subnormal: mantissa * 2^-24, exact in fp32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

void ConvertToFloat(const TensorRef& tensor, std::span<float> out) {
  assert(out.size() == static_cast<size_t>(tensor.info->num_elements()));
  const std::byte* src = tensor.data();
  switch (tensor.info->dtype) {
    case DType::kBF16:
      for (size_t k = 0; k < out.size(); ++k) out[k] = Bf16ToFloat(LoadU16(src + 2 * k));
      break;
    case DType::kF16:
      for (size_t k = 0; k < out.size(); ++k) out[k] = HalfToFloat(LoadU16(src + 2 * k));
      break;
    case DType::kF32:
      std::memcpy(out.data(), src, out.size() * sizeof(float));
      break;
    default:
      // BindWeights admits only the float dtypes above.
      assert(false && "ConvertToFloat: not a float tensor");
  }
}

std::vector<float> ToFloatVector(const TensorRef& tensor) {
  std::vector<float> out(static_cast<size_t>(tensor.info->num_elements()));
  ConvertToFloat(tensor, out);
  return out;
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const std::string& model_dir) {
  auto model = std::make_unique<LoadedModel>();
  model->dir = model_dir;
  MODEL_ASSIGN_OR_RETURN(model->config, LoadModelConfig(model_dir));
  MODEL_ASSIGN_OR_RETURN(model->checkpoint, Checkpoint::Open(model_dir));
  MODEL_ASSIGN_OR_RETURN(model->weights, BindWeights(model->config, *model->checkpoint));
  return model;
}

}  // namespace gemma
