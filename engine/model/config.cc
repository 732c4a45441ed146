#include "engine/model/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/status/status.h"
#include "engine/model/config_internal.h"
#include "engine/model/json_fields.h"
#include "engine/model/status_macros.h"
#include "engine/model/str_cat.h"

namespace gemma {
namespace {

using model_internal::JsonFields;
using nlohmann::json;

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr std::string_view kMultimodalArch = "Gemma4ForConditionalGeneration";
constexpr std::string_view kTextArch = "Gemma4ForCausalLM";

// Reads the architecture and decides where the text decoder's fields live.
absl::Status ParseArchitecture(const JsonFields& root, ModelConfig* config) {
  const json* archs = root.Get("architectures");
  if (archs == nullptr) return root.Error("architectures", "is missing");
  if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
    return root.Error("architectures", "must be a non-empty list of strings");
  }
  config->architecture = (*archs)[0].get<std::string>();
  if (config->architecture == kMultimodalArch) {
    config->multimodal = true;
  } else if (config->architecture == kTextArch) {
    config->multimodal = false;
    if (root.Has("text_config")) {
      return root.Error("text_config", model_internal::Cat("is present but architectures is ",
                                                           kTextArch, " (text-only)"));
    }
  } else {
    return root.Unsupported("architectures",
                            model_internal::Cat("is \"", config->architecture, "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> RequireInt(const JsonFields& f, std::string_view key, int64_t min,
                               int64_t max) {
  MODEL_ASSIGN_OR_RETURN(int64_t value, f.Int(key, min, max));
  return static_cast<int>(value);
}

absl::Status ParseFloats(const JsonFields& text, ModelConfig* config) {
  MODEL_ASSIGN_OR_RETURN(double eps, text.Number("rms_norm_eps"));
  if (!(eps > 0.0 && eps < 1.0)) return text.Error("rms_norm_eps", "must be in (0, 1)");
  config->rms_norm_eps = static_cast<float>(eps);
  // Required to be written even though null (no softcap) is a valid value.
  if (!text.object().contains("final_logit_softcapping")) {
    return text.Error("final_logit_softcapping", "is missing");
  }
  config->final_logit_softcap = 0.0f;
  if (text.Has("final_logit_softcapping")) {
    MODEL_ASSIGN_OR_RETURN(double cap, text.Number("final_logit_softcapping"));
    if (!(cap >= 0.0 && cap < 1e30)) {
      return text.Error("final_logit_softcapping", "must be >= 0");
    }
    config->final_logit_softcap = static_cast<float>(cap);
  }
  return absl::OkStatus();
}

absl::Status ParseShapes(const JsonFields& text, ModelConfig* config) {
  using namespace model_internal;
  MODEL_ASSIGN_OR_RETURN(config->vocab_size, RequireInt(text, "vocab_size", 1, kMaxVocab));
  MODEL_ASSIGN_OR_RETURN(config->hidden_size, RequireInt(text, "hidden_size", 1, kMaxDim));
  MODEL_ASSIGN_OR_RETURN(config->intermediate_size,
                         RequireInt(text, "intermediate_size", 1, kMaxDim));
  MODEL_ASSIGN_OR_RETURN(config->num_layers, RequireInt(text, "num_hidden_layers", 1, kMaxLayers));
  MODEL_ASSIGN_OR_RETURN(config->num_heads, RequireInt(text, "num_attention_heads", 1, kMaxHeads));
  MODEL_ASSIGN_OR_RETURN(config->sliding_window, RequireInt(text, "sliding_window", 1, kMaxInt32));
  MODEL_ASSIGN_OR_RETURN(config->max_position_embeddings,
                         RequireInt(text, "max_position_embeddings", 1, kMaxInt32));
  MODEL_ASSIGN_OR_RETURN(config->hidden_activation, text.String("hidden_activation"));
  if (config->hidden_activation != "gelu_pytorch_tanh") {
    return text.Unsupported("hidden_activation",
                            model_internal::Cat("is \"", config->hidden_activation,
                                                "\", only gelu_pytorch_tanh is implemented"));
  }
  return ParseFloats(text, config);
}

// Features of the Gemma 4 family that the 31B does not use. They must be
// written explicitly: the class defaults turn some of them on.
absl::Status CheckUnsupported(const JsonFields& text, const JsonFields& root) {
  MODEL_ASSIGN_OR_RETURN(int64_t ple, text.Int("hidden_size_per_layer_input", 0, kMaxInt32));
  if (ple != 0) return text.Unsupported("hidden_size_per_layer_input", "is not 0");
  MODEL_ASSIGN_OR_RETURN(bool moe, text.Bool("enable_moe_block"));
  if (moe) return text.Unsupported("enable_moe_block", "is true");
  MODEL_ASSIGN_OR_RETURN(int64_t shared, text.Int("num_kv_shared_layers", 0, kMaxInt32));
  if (shared != 0) return text.Unsupported("num_kv_shared_layers", "is not 0");
  for (std::string_view key : {"use_double_wide_mlp", "attention_bias"}) {
    if (!text.Has(key)) continue;
    MODEL_ASSIGN_OR_RETURN(bool on, text.Bool(key));
    if (on) return text.Unsupported(key, "is true");
  }
  // lm_head is the embedding; an untied head would need weights we never load.
  const JsonFields& tie_owner = text.Has("tie_word_embeddings") ? text : root;
  if (!tie_owner.Has("tie_word_embeddings")) return text.Error("tie_word_embeddings", "is missing");
  MODEL_ASSIGN_OR_RETURN(bool tied, tie_owner.Bool("tie_word_embeddings"));
  if (!tied) return tie_owner.Unsupported("tie_word_embeddings", "is false");
  return absl::OkStatus();
}

// Appends the eos id(s) of `owner.eos_token_id` (an int or a list of ints).
absl::Status AppendEosIds(const JsonFields& owner, int vocab_size, std::vector<int32_t>* ids) {
  const json* value = owner.Get("eos_token_id");
  if (value == nullptr) return absl::OkStatus();
  std::vector<json> items =
      value->is_array() ? value->get<std::vector<json>>() : std::vector<json>{*value};
  for (const json& item : items) {
    int64_t id = -1;
    if (!model_internal::JsonToInt64(item, &id) || id < 0 || id >= vocab_size) {
      return owner.Error("eos_token_id",
                         model_internal::Cat("must be token ids in [0, ", vocab_size,
                                             ") (an int or a list of ints)"));
    }
    if (std::find(ids->begin(), ids->end(), id) == ids->end()) {
      ids->push_back(static_cast<int32_t>(id));
    }
  }
  return absl::OkStatus();
}

// Token ids may sit in text_config or at the top level of a multimodal config.
absl::Status ParseTokenIds(const JsonFields& text, const JsonFields& root, ModelConfig* config) {
  auto read_id = [&](std::string_view key) -> absl::StatusOr<int32_t> {
    const JsonFields& owner = text.Has(key) || !root.Has(key) ? text : root;
    MODEL_ASSIGN_OR_RETURN(int64_t id, owner.Int(key, 0, config->vocab_size - 1));
    return static_cast<int32_t>(id);
  };
  MODEL_ASSIGN_OR_RETURN(config->pad_token_id, read_id("pad_token_id"));
  MODEL_ASSIGN_OR_RETURN(config->bos_token_id, read_id("bos_token_id"));
  config->eos_token_ids.clear();
  MODEL_RETURN_IF_ERROR(AppendEosIds(text, config->vocab_size, &config->eos_token_ids));
  if (config->multimodal) {
    MODEL_RETURN_IF_ERROR(AppendEosIds(root, config->vocab_size, &config->eos_token_ids));
  }
  if (config->eos_token_ids.empty()) return text.Error("eos_token_id", "is missing");
  return absl::OkStatus();
}

// The declared dtype is informational (the tensors carry their own).
std::string DeclaredDtype(const JsonFields& text, const JsonFields& root) {
  for (const JsonFields* owner : {&text, &root}) {
    for (std::string_view key : {"dtype", "torch_dtype"}) {
      const json* value = owner->Get(key);
      if (value != nullptr && value->is_string()) return value->get<std::string>();
    }
  }
  return "";
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(model_internal::Cat("cannot open ", path));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::DataLossError(model_internal::Cat("cannot read ", path));
  return contents.str();
}

}  // namespace

int ModelConfig::num_global_layers() const {
  return static_cast<int>(std::count_if(layers.begin(), layers.end(),
                                        [](const LayerSpec& l) { return l.is_global(); }));
}

int ModelConfig::max_head_dim() const {
  int result = 0;
  for (const LayerSpec& l : layers) result = std::max(result, l.head_dim);
  return result;
}

int64_t ModelConfig::num_parameters() const {
  const int64_t h = hidden_size;
  const int64_t i = intermediate_size;
  int64_t total = int64_t{vocab_size} * h + h;  // tied embedding + final norm
  for (const LayerSpec& l : layers) {
    const int64_t q = int64_t{num_heads} * l.head_dim;
    const int64_t kv = int64_t{l.num_kv_heads} * l.head_dim;
    total += 2 * q * h;                    // q_proj, o_proj
    total += (l.k_eq_v ? 1 : 2) * kv * h;  // k_proj (+ v_proj)
    total += 2 * int64_t{l.head_dim};      // q_norm, k_norm
    total += 4 * h + 3 * i * h + 1;        // four norms, MLP, layer_scalar
  }
  return total;
}

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, std::string_view source) {
  MODEL_ASSIGN_OR_RETURN(json doc, model_internal::ParseJson(json_text, source));
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(model_internal::Cat(source, ": must be a JSON object"));
  }
  JsonFields root(doc, source, "");
  ModelConfig config;
  MODEL_RETURN_IF_ERROR(ParseArchitecture(root, &config));
  JsonFields text = root;
  if (config.multimodal) {
    MODEL_ASSIGN_OR_RETURN(text, root.Object("text_config"));
  }
  MODEL_RETURN_IF_ERROR(ParseShapes(text, &config));
  MODEL_RETURN_IF_ERROR(CheckUnsupported(text, root));
  MODEL_RETURN_IF_ERROR(ParseTokenIds(text, root, &config));
  MODEL_RETURN_IF_ERROR(model_internal::ParseLayerSpecs(text, &config));
  config.dtype = DeclaredDtype(text, root);
  auto int4 = quant::ParseInt4QuantizationConfig(json_text);
  if (!int4.ok()) return absl::InvalidArgumentError(model_internal::Cat(source, ": ", int4.status().message()));
  config.int4_checkpoint = *std::move(int4);
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  MODEL_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  MODEL_ASSIGN_OR_RETURN(ModelConfig config, ParseModelConfig(text, path));
  const std::string gen_path =
      (std::filesystem::path(model_dir) / "generation_config.json").string();
  if (!std::filesystem::exists(gen_path)) return config;
  MODEL_ASSIGN_OR_RETURN(std::string gen_text, ReadFile(gen_path));
  MODEL_ASSIGN_OR_RETURN(json gen, model_internal::ParseJson(gen_text, gen_path));
  if (!gen.is_object()) {
    return absl::InvalidArgumentError(model_internal::Cat(gen_path, ": must be a JSON object"));
  }
  const JsonFields gen_fields(gen, gen_path, "");
  MODEL_RETURN_IF_ERROR(AppendEosIds(gen_fields, config.vocab_size, &config.eos_token_ids));
  MODEL_ASSIGN_OR_RETURN(config.generation_defaults,
                         model_internal::ParseGenerationDefaults(gen_fields));
  return config;
}

}  // namespace gemma
