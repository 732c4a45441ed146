#include "engine/model/quantization_config.h"

#include <nlohmann/json.hpp>
#include <regex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gemma::quant {
namespace {

using nlohmann::json;

absl::Status Refuse(std::string_view field, const json& value, std::string_view supported) {
  return absl::InvalidArgumentError(absl::StrCat("quantization_config: ", std::string(field), " = ", value.dump(),
                                                 " is not supported (supported: ", std::string(supported), ")"));
}

bool IsNullOrAbsent(const json& obj, const char* key) { return !obj.contains(key) || obj[key].is_null(); }

absl::Status CheckWeights(const std::string& group, const json& w, Int4CheckpointConfig& out) {
  const std::string at = absl::StrCat("config_groups.", group, ".weights.");
  if (!w.is_object()) return Refuse(at.substr(0, at.size() - 1), w, "an object");
  if (w.value("type", json("int")) != "int") return Refuse(at + "type", w["type"], "\"int\"");
  if (!w.contains("num_bits") || w["num_bits"] != 4) return Refuse(at + "num_bits", w.value("num_bits", json()), "4");
  if (w.value("symmetric", json(true)) != true) return Refuse(at + "symmetric", w["symmetric"], "true");
  if (w.value("strategy", json("group")) != "group") return Refuse(at + "strategy", w["strategy"], "\"group\"");
  if (!w.contains("group_size") || !w["group_size"].is_number_integer() ||
      (w["group_size"] != 32 && w["group_size"] != 128)) {
    return Refuse(at + "group_size", w.value("group_size", json()), "32, 128");
  }
  if (w.value("dynamic", json(false)) != false) return Refuse(at + "dynamic", w["dynamic"], "false");
  if (!IsNullOrAbsent(w, "actorder") && w["actorder"] != false && w["actorder"] != "static") {
    return Refuse(at + "actorder", w["actorder"], "null, \"static\"");
  }
  if (!IsNullOrAbsent(w, "block_structure")) return Refuse(at + "block_structure", w["block_structure"], "null");
  out.group_size = w["group_size"].get<int>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<Int4CheckpointConfig>> ParseInt4QuantizationConfig(std::string_view config_json) {
  const json root = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return absl::InvalidArgumentError("config.json: not a JSON object");
  }
  if (!root.contains("quantization_config")) return std::nullopt;
  const json& q = root["quantization_config"];
  if (!q.is_object()) return Refuse("quantization_config", q, "an object");
  const std::string method = q.value("quant_method", "");
  if (method != "compressed-tensors") return std::nullopt;  // FP8 and others: their own loaders
  const json format = q.value("format", json());
  if (format == "float-quantized" || format == "naive-quantized") return std::nullopt;  // FP8 checkpoints
  if (format != "pack-quantized") return Refuse("format", format, "\"pack-quantized\"");
  if (!IsNullOrAbsent(q, "sparsity_config") && q["sparsity_config"] != json::object()) {
    return Refuse("sparsity_config", q["sparsity_config"], "null, {}");
  }
  if (!IsNullOrAbsent(q, "kv_cache_scheme")) return Refuse("kv_cache_scheme", q["kv_cache_scheme"], "null");
  if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty()) {
    return Refuse("config_groups", q.value("config_groups", json()), "one group");
  }
  Int4CheckpointConfig out;
  bool first = true;
  for (const auto& [name, group] : q["config_groups"].items()) {
    if (!group.is_object()) return Refuse(absl::StrCat("config_groups.", name), group, "an object");
    const std::string at = absl::StrCat("config_groups.", name, ".");
    // Every linear layer (less `ignore`): the loader expects each one packed.
    if (group.value("targets", json()) != json::array({"Linear"})) {
      return Refuse(at + "targets", group.value("targets", json()), "[\"Linear\"]");
    }
    if (!IsNullOrAbsent(group, "format") && group["format"] != "pack-quantized") {
      return Refuse(at + "format", group["format"], "\"pack-quantized\"");
    }
    if (!IsNullOrAbsent(group, "input_activations")) {
      return Refuse(at + "input_activations", group["input_activations"], "null (W4A16)");
    }
    if (!IsNullOrAbsent(group, "output_activations")) {
      return Refuse(at + "output_activations", group["output_activations"], "null");
    }
    Int4CheckpointConfig one;
    if (absl::Status s = CheckWeights(name, group.value("weights", json()), one); !s.ok()) return s;
    if (!first && one.group_size != out.group_size) {
      return Refuse(at + "weights.group_size", one.group_size, absl::StrCat(out.group_size, " (as the other groups)"));
    }
    out.group_size = one.group_size;
    first = false;
  }
  if (q.contains("ignore")) {
    if (!q["ignore"].is_array()) return Refuse("ignore", q["ignore"], "a list of names");
    for (const json& e : q["ignore"]) {
      if (!e.is_string()) return Refuse("ignore", e, "names");
      const std::string name = e.get<std::string>();
      if (name.rfind("re:", 0) == 0) {
        try {
          std::regex check(name.substr(3));
        } catch (const std::regex_error&) {
          return Refuse("ignore", e, "names and \"re:\" + a valid regular expression");
        }
      }
      out.ignore.push_back(name);
    }
  }
  return out;
}

bool IsIgnored(const Int4CheckpointConfig& config, std::string_view module) {
  for (const std::string& e : config.ignore) {
    if (e.rfind("re:", 0) == 0) {
      std::regex re(e.substr(3));
      if (std::regex_match(std::string(module), re)) return true;
    } else if (module == e || (module.size() > e.size() && module.ends_with(e) &&
                               module[module.size() - e.size() - 1] == '.')) {
      return true;
    }
  }
  return false;
}

}  // namespace gemma::quant
