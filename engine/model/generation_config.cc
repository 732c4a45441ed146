// The sampling fields of generation_config.json.
#include <limits>

#include "engine/model/config.h"
#include "engine/model/config_internal.h"
#include "engine/model/json_fields.h"
#include "engine/model/status_macros.h"
#include "engine/model/str_cat.h"

namespace gemma::model_internal {
namespace {

// A number in [min, max] (or (min, max] when `min_open`), or unset when absent.
absl::StatusOr<std::optional<float>> OptionalNumber(const JsonFields& gen, std::string_view key,
                                                    double min, bool min_open, double max) {
  if (!gen.Has(key)) return std::optional<float>();
  absl::StatusOr<double> value = gen.Number(key);
  if (!value.ok()) return value.status();
  const bool above_min = min_open ? *value > min : *value >= min;
  if (!above_min || !(*value <= max)) {
    return gen.Error(key, Cat("must be in ", min_open ? "(" : "[", min, ", ", max, "], got ",
                              *value));
  }
  return std::optional<float>(static_cast<float>(*value));
}

}  // namespace

absl::StatusOr<GenerationDefaults> ParseGenerationDefaults(const JsonFields& gen) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  GenerationDefaults out;
  MODEL_ASSIGN_OR_RETURN(out.temperature, OptionalNumber(gen, "temperature", 0, false, kInf));
  MODEL_ASSIGN_OR_RETURN(out.top_p, OptionalNumber(gen, "top_p", 0, true, 1));
  MODEL_ASSIGN_OR_RETURN(out.repetition_penalty,
                         OptionalNumber(gen, "repetition_penalty", 0, true, kInf));
  if (gen.Has("top_k")) {
    MODEL_ASSIGN_OR_RETURN(int64_t top_k, gen.Int("top_k", 0, std::numeric_limits<int>::max()));
    out.top_k = static_cast<int>(top_k);
  }
  return out;
}

}  // namespace gemma::model_internal
