#include "engine/model/json_fields.h"

#include <limits>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/str_cat.h"

namespace gemma::model_internal {

using nlohmann::json;

absl::StatusOr<json> ParseJson(std::string_view text, std::string_view source) {
  // One key set per open object, so duplicates are found at every depth.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto on_event = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(Cat(source, ": invalid JSON: ", e.what()));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(Cat(source, ": duplicate JSON key \"", duplicate, "\""));
  }
  return root;
}

bool JsonToInt64(const json& value, int64_t* out) {
  if (value.is_number_unsigned()) {
    auto u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (value.is_number_integer()) {
    *out = value.get<int64_t>();
    return true;
  }
  return false;
}

JsonFields::JsonFields(const json& object, std::string_view source, std::string_view path)
    : object_(&object), source_(source), path_(path) {}

const json* JsonFields::Get(std::string_view key) const {
  if (!object_->is_object()) return nullptr;
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::Has(std::string_view key) const { return Get(key) != nullptr; }

std::string JsonFields::FieldName(std::string_view key) const { return Cat(path_, key); }

absl::Status JsonFields::Error(std::string_view key, std::string_view what) const {
  return absl::InvalidArgumentError(Cat(source_, ": ", path_, key, " ", what));
}

absl::Status JsonFields::Unsupported(std::string_view key, std::string_view what) const {
  return absl::UnimplementedError(Cat(source_, ": ", path_, key, " ", what, " (unsupported)"));
}

absl::StatusOr<int64_t> JsonFields::Int(std::string_view key, int64_t min, int64_t max) const {
  const json* value = Get(key);
  if (value == nullptr) return Error(key, "is missing");
  int64_t result = 0;
  if (!JsonToInt64(*value, &result)) return Error(key, "must be an integer");
  if (result < min || result > max) {
    return Error(key, Cat("must be in [", min, ", ", max, "], got ", result));
  }
  return result;
}

absl::StatusOr<double> JsonFields::Number(std::string_view key) const {
  const json* value = Get(key);
  if (value == nullptr) return Error(key, "is missing");
  if (!value->is_number()) return Error(key, "must be a number");
  return value->get<double>();
}

absl::StatusOr<bool> JsonFields::Bool(std::string_view key) const {
  const json* value = Get(key);
  if (value == nullptr) return Error(key, "is missing");
  if (!value->is_boolean()) return Error(key, "must be true or false");
  return value->get<bool>();
}

absl::StatusOr<std::string> JsonFields::String(std::string_view key) const {
  const json* value = Get(key);
  if (value == nullptr) return Error(key, "is missing");
  if (!value->is_string()) return Error(key, "must be a string");
  return value->get<std::string>();
}

absl::StatusOr<JsonFields> JsonFields::Object(std::string_view key) const {
  const json* value = Get(key);
  if (value == nullptr) return Error(key, "is missing");
  if (!value->is_object()) return Error(key, "must be an object");
  return JsonFields(*value, source_, Cat(path_, key, "."));
}

}  // namespace gemma::model_internal
