// Typed access to fields of an nlohmann::json tree with errors that name the
// file and the JSON path: "tokenizer.json: /model/type: expected a string".
//
// Thread-safety: stateless apart from the strings it holds; use one per parse.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gemma {

class JsonFields {
 public:
  explicit JsonFields(std::string_view file_name) : file_name_(file_name) {}

  // INVALID_ARGUMENT "<file>: <path>: <message>".
  absl::Status Error(std::string_view path, std::string_view message) const;
  // "<path>/<key>", the key escaped as RFC 6901 says.
  static std::string Child(std::string_view path, std::string_view key);
  static std::string Child(std::string_view path, size_t index);

  // The field, or nullptr when the object lacks it or it is null.
  static const nlohmann::json* Find(const nlohmann::json& object, std::string_view key);
  absl::Status ExpectObject(const nlohmann::json& value, std::string_view path) const;
  absl::Status ExpectArray(const nlohmann::json& value, std::string_view path) const;
  // A required string field.
  absl::StatusOr<std::string> String(const nlohmann::json& object, std::string_view key,
                                     std::string_view path) const;
  // An optional boolean field: `fallback` when missing or null.
  absl::StatusOr<bool> Bool(const nlohmann::json& object, std::string_view key,
                            std::string_view path, bool fallback) const;
  // A required integer field in [0, max].
  absl::StatusOr<int64_t> Count(const nlohmann::json& object, std::string_view key,
                                std::string_view path, int64_t max) const;

 private:
  std::string file_name_;
};

}  // namespace gemma
