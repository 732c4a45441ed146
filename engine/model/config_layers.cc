// Per-layer attention specs: layer_types, the two head-dim schemas, k_eq_v
// and RoPE.
#include <cmath>
#include <map>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "engine/model/config_internal.h"
#include "engine/model/status_macros.h"
#include "engine/model/str_cat.h"

namespace gemma::model_internal {
namespace {

using nlohmann::json;

constexpr std::string_view kSlidingType = "sliding_attention";
constexpr std::string_view kGlobalType = "full_attention";

// Global-layer overrides from per_layer_config, by layer index.
struct LayerOverride {
  std::optional<int> head_dim;
  std::optional<int> num_kv_heads;
};

absl::StatusOr<std::vector<LayerType>> ParseLayerTypes(const JsonFields& text, int num_layers) {
  const json* types = text.Get("layer_types");
  if (types == nullptr) return text.Error("layer_types", "is missing");
  if (!types->is_array()) return text.Error("layer_types", "must be a list");
  if (types->size() != static_cast<size_t>(num_layers)) {
    return text.Error("layer_types",
                      Cat("has ", types->size(), " entries but num_hidden_layers is ", num_layers));
  }
  std::vector<LayerType> result;
  for (size_t i = 0; i < types->size(); ++i) {
    const json& t = (*types)[i];
    if (t.is_string() && t.get<std::string>() == kSlidingType) {
      result.push_back(LayerType::kSliding);
    } else if (t.is_string() && t.get<std::string>() == kGlobalType) {
      result.push_back(LayerType::kGlobal);
    } else {
      return text.Error(
          Cat("layer_types[", i, "]"),
          Cat("is ", t.dump(), "; expected \"", kSlidingType, "\" or \"", kGlobalType, "\""));
    }
  }
  return result;
}

absl::StatusOr<LayerOverride> ParseOverrideEntry(const JsonFields& entry) {
  LayerOverride result;
  for (const auto& [key, value] : entry.object().items()) {
    if (key == "head_dim") {
      MODEL_ASSIGN_OR_RETURN(int64_t d, entry.Int(key, 1, kMaxHeadDim));
      result.head_dim = static_cast<int>(d);
    } else if (key == "num_key_value_heads") {
      MODEL_ASSIGN_OR_RETURN(int64_t kv, entry.Int(key, 1, kMaxHeads));
      result.num_kv_heads = static_cast<int>(kv);
    } else if (!value.is_null()) {
      return entry.Unsupported(key, "is not a known per-layer setting");
    }
  }
  return result;
}

// per_layer_config is keyed by the layer index as a (zero-padded) string.
absl::StatusOr<std::map<int, LayerOverride>> ParsePerLayerConfig(
    const JsonFields& text, const std::vector<LayerType>& types) {
  std::map<int, LayerOverride> result;
  if (!text.Has("per_layer_config")) return result;
  MODEL_ASSIGN_OR_RETURN(JsonFields plc, text.Object("per_layer_config"));
  for (const auto& [key, value] : plc.object().items()) {
    const bool digits =
        !key.empty() && key.size() <= 6 && std::all_of(key.begin(), key.end(), absl::ascii_isdigit);
    const int layer = digits ? std::stoi(key) : -1;
    if (layer < 0 || layer >= static_cast<int>(types.size())) {
      return plc.Error(key, Cat("is not a layer index in [0, ", types.size(), ")"));
    }
    if (types[layer] != LayerType::kGlobal) {
      return plc.Error(key, Cat("names sliding layer ", layer,
                                "; per_layer_config is only for full_attention layers"));
    }
    if (result.count(layer) != 0) {
      return plc.Error(key, Cat("repeats layer ", layer));
    }
    if (!value.is_object()) return plc.Error(key, "must be an object");
    MODEL_ASSIGN_OR_RETURN(result[layer], ParseOverrideEntry(JsonFields(value, plc.source(),
                                                                        plc.FieldName(key) + ".")));
  }
  return result;
}

// A global layer's value: the per-layer entry or the explicit global field;
// both present must agree, neither present is an error naming the field.
absl::StatusOr<int> GlobalValue(const JsonFields& text, std::string_view global_key, int64_t max,
                                std::optional<int> per_layer, int layer) {
  std::optional<int> global;
  if (text.Has(global_key)) {
    MODEL_ASSIGN_OR_RETURN(int64_t v, text.Int(global_key, 1, max));
    global = static_cast<int>(v);
  }
  if (per_layer && global && *per_layer != *global) {
    return text.Error(global_key, Cat("is ", *global, " but per_layer_config gives ", *per_layer,
                                      " for layer ", layer));
  }
  if (per_layer) return *per_layer;
  if (global) return *global;
  return text.Error(global_key, Cat("is missing (and per_layer_config has no entry ",
                                    "for global layer ", layer, ")"));
}

struct RopeSpec {
  float theta = 0.0f;
  bool proportional = false;
  double partial_factor = 1.0;
};

absl::StatusOr<RopeSpec> ParseRope(const JsonFields& rope_params, std::string_view type) {
  MODEL_ASSIGN_OR_RETURN(JsonFields rope, rope_params.Object(type));
  RopeSpec spec;
  MODEL_ASSIGN_OR_RETURN(std::string rope_type, rope.String("rope_type"));
  if (rope_type != "default" && rope_type != "proportional") {
    return rope.Unsupported("rope_type",
                            Cat("is \"", rope_type, "\"; expected default or proportional"));
  }
  spec.proportional = rope_type == "proportional";
  MODEL_ASSIGN_OR_RETURN(double theta, rope.Number("rope_theta"));
  if (!(theta > 1.0 && theta < 1e30)) return rope.Error("rope_theta", "must be > 1");
  spec.theta = static_cast<float>(theta);
  if (rope.Has("partial_rotary_factor") || spec.proportional) {
    MODEL_ASSIGN_OR_RETURN(spec.partial_factor, rope.Number("partial_rotary_factor"));
    if (!(spec.partial_factor > 0.0 && spec.partial_factor <= 1.0)) {
      return rope.Error("partial_rotary_factor", "must be in (0, 1]");
    }
    // Default rope with a partial factor shrinks the exponent denominator,
    // which LayerSpec (pair k uses theta^(-2k/head_dim)) cannot express.
    if (!spec.proportional && spec.partial_factor != 1.0) {
      return rope.Unsupported("partial_rotary_factor", "is not 1 with rope_type default");
    }
  }
  return spec;
}

absl::Status SetRope(const JsonFields& text, const RopeSpec& rope, std::string_view type,
                     LayerSpec* spec) {
  spec->rope_theta = rope.theta;
  const double pairs = rope.partial_factor * spec->head_dim / 2.0;
  if (std::abs(pairs - std::round(pairs)) > 1e-9 || std::round(pairs) < 1) {
    return text.Error(
        Cat("rope_parameters.", type, ".partial_rotary_factor"),
        Cat("times head_dim ", spec->head_dim, " / 2 is not a whole number of pairs"));
  }
  spec->rope_pairs = static_cast<int>(std::round(pairs));
  return absl::OkStatus();
}

absl::Status CheckHeads(const JsonFields& text, const LayerSpec& spec, int num_heads, int layer) {
  if (spec.head_dim % 2 != 0) {
    return text.Error(spec.is_global() ? "global_head_dim" : "head_dim",
                      Cat("must be even (rotate-half RoPE), got ", spec.head_dim));
  }
  if (num_heads % spec.num_kv_heads != 0) {
    return text.Error(
        "num_attention_heads",
        Cat("(", num_heads, ") is not divisible by the ", spec.num_kv_heads,
            " key/value heads of layer ", layer,
            spec.is_global() ? " (num_global_key_value_heads)" : " (num_key_value_heads)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseLayerSpecs(const JsonFields& text, ModelConfig* config) {
  MODEL_ASSIGN_OR_RETURN(std::vector<LayerType> types, ParseLayerTypes(text, config->num_layers));
  MODEL_ASSIGN_OR_RETURN(auto overrides, ParsePerLayerConfig(text, types));
  MODEL_ASSIGN_OR_RETURN(int64_t head_dim, text.Int("head_dim", 1, kMaxHeadDim));
  MODEL_ASSIGN_OR_RETURN(int64_t kv_heads, text.Int("num_key_value_heads", 1, kMaxHeads));
  MODEL_ASSIGN_OR_RETURN(bool k_eq_v, text.Bool("attention_k_eq_v"));
  MODEL_ASSIGN_OR_RETURN(JsonFields rope_params, text.Object("rope_parameters"));
  const bool any_sliding = std::count(types.begin(), types.end(), LayerType::kSliding) > 0;
  const bool any_global = std::count(types.begin(), types.end(), LayerType::kGlobal) > 0;
  RopeSpec sliding_rope, global_rope;
  if (any_sliding) {
    MODEL_ASSIGN_OR_RETURN(sliding_rope, ParseRope(rope_params, kSlidingType));
  }
  if (any_global) {
    MODEL_ASSIGN_OR_RETURN(global_rope, ParseRope(rope_params, kGlobalType));
  }
  config->layers.clear();
  for (int i = 0; i < config->num_layers; ++i) {
    LayerSpec spec;
    spec.type = types[i];
    if (spec.is_global()) {
      const LayerOverride& o = overrides[i];
      MODEL_ASSIGN_OR_RETURN(spec.head_dim,
                             GlobalValue(text, "global_head_dim", kMaxHeadDim, o.head_dim, i));
      MODEL_ASSIGN_OR_RETURN(spec.num_kv_heads, GlobalValue(text, "num_global_key_value_heads",
                                                            kMaxHeads, o.num_kv_heads, i));
      spec.k_eq_v = k_eq_v;
    } else {
      spec.head_dim = static_cast<int>(head_dim);
      spec.num_kv_heads = static_cast<int>(kv_heads);
    }
    MODEL_RETURN_IF_ERROR(CheckHeads(text, spec, config->num_heads, i));
    MODEL_RETURN_IF_ERROR(SetRope(text, spec.is_global() ? global_rope : sliding_rope,
                                  spec.is_global() ? kGlobalType : kSlidingType, &spec));
    config->layers.push_back(spec);
  }
  return absl::OkStatus();
}

}  // namespace gemma::model_internal
