#include "engine/tokenizer/json_fields.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace gemma {

absl::Status JsonFields::Error(std::string_view path, std::string_view message) const {
  return absl::InvalidArgumentError(
      absl::StrCat(file_name_, ": ", path.empty() ? "/" : std::string(path), ": ",
                   std::string(message)));
}

std::string JsonFields::Child(std::string_view path, std::string_view key) {
  return absl::StrCat(std::string(path), "/", absl::StrReplaceAll(std::string(key), {{"~", "~0"}, {"/", "~1"}}));
}

std::string JsonFields::Child(std::string_view path, size_t index) {
  return absl::StrCat(std::string(path), "/", index);
}

const nlohmann::json* JsonFields::Find(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

absl::Status JsonFields::ExpectObject(const nlohmann::json& value, std::string_view path) const {
  return value.is_object() ? absl::OkStatus() : Error(path, "expected an object");
}

absl::Status JsonFields::ExpectArray(const nlohmann::json& value, std::string_view path) const {
  return value.is_array() ? absl::OkStatus() : Error(path, "expected an array");
}

absl::StatusOr<std::string> JsonFields::String(const nlohmann::json& object, std::string_view key,
                                               std::string_view path) const {
  const nlohmann::json* field = Find(object, key);
  if (field == nullptr || !field->is_string()) return Error(Child(path, key), "expected a string");
  return field->get<std::string>();
}

absl::StatusOr<bool> JsonFields::Bool(const nlohmann::json& object, std::string_view key,
                                      std::string_view path, bool fallback) const {
  const nlohmann::json* field = Find(object, key);
  if (field == nullptr) return fallback;
  if (!field->is_boolean()) return Error(Child(path, key), "expected true or false");
  return field->get<bool>();
}

absl::StatusOr<int64_t> JsonFields::Count(const nlohmann::json& object, std::string_view key,
                                          std::string_view path, int64_t max) const {
  const nlohmann::json* field = Find(object, key);
  if (field == nullptr || !field->is_number_integer() ||
      (field->is_number_unsigned() ? field->get<uint64_t>() > uint64_t(max)
                                   : field->get<int64_t>() < 0 || field->get<int64_t>() > max)) {
    return Error(Child(path, key), absl::StrCat("expected an integer in [0, ", max, "]"));
  }
  return field->get<int64_t>();
}

}  // namespace gemma
