// Private to engine/model: strict JSON parsing and typed field access whose
// errors name the file and the full field path ("config.json:
// text_config.hidden_size is missing"). nlohmann exceptions never escape.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gemma::model_internal {

// Parses `text` as JSON; duplicate object keys are an error because the DOM
// would silently keep only the last one. `source` names the file in errors.
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view source);

// A view of one JSON object. A field that is absent or null counts as
// missing. Thread-safety: as the underlying json (read-only).
class JsonFields {
 public:
  // `path` is the object's dotted path with a trailing dot ("" for the root,
  // "text_config." for a nested one). REQUIRES: `object` outlives this.
  JsonFields(const nlohmann::json& object, std::string_view source, std::string_view path);

  bool Has(std::string_view key) const;
  const nlohmann::json* Get(std::string_view key) const;  // nullptr when missing

  absl::StatusOr<int64_t> Int(std::string_view key, int64_t min, int64_t max) const;
  absl::StatusOr<double> Number(std::string_view key) const;
  absl::StatusOr<bool> Bool(std::string_view key) const;
  absl::StatusOr<std::string> String(std::string_view key) const;
  absl::StatusOr<JsonFields> Object(std::string_view key) const;

  // "<source>: <path><key> <what>" as an InvalidArgument error.
  absl::Status Error(std::string_view key, std::string_view what) const;
  // Same, as an Unimplemented error for valid but unsupported settings.
  absl::Status Unsupported(std::string_view key, std::string_view what) const;
  std::string FieldName(std::string_view key) const;
  const nlohmann::json& object() const { return *object_; }
  std::string_view source() const { return source_; }

 private:
  const nlohmann::json* object_;
  std::string source_;
  std::string path_;
};

// Reads a JSON integer (not bool, not float) into `out`; false if it is not one.
bool JsonToInt64(const nlohmann::json& value, int64_t* out);

}  // namespace gemma::model_internal
