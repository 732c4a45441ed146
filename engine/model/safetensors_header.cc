// ParseSafetensorsHeader: the pure, fuzzed part of safetensors reading.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "engine/model/json_fields.h"
#include "engine/model/safetensors.h"
#include "engine/model/status_macros.h"
#include "engine/model/str_cat.h"

namespace gemma {
namespace {

using nlohmann::json;

// Real headers are well under 1 MB (31B: ~100 KB); the cap bounds the memory
// a hostile file can make us spend on JSON.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr size_t kLengthPrefixBytes = 8;

struct DTypeEntry {
  std::string_view name;
  DType dtype;
  size_t size;
};
// Every dtype safetensors writes with a whole number of bytes per element;
// names outside DType map to kOther but keep their size so byte lengths
// are still checked.
constexpr std::array<DTypeEntry, 15> kDTypes = {{
    {"BF16", DType::kBF16, 2},
    {"F16", DType::kF16, 2},
    {"F32", DType::kF32, 4},
    {"F8_E4M3", DType::kF8E4M3, 1},
    {"I32", DType::kI32, 4},
    {"I64", DType::kI64, 8},
    {"F64", DType::kOther, 8},
    {"F8_E5M2", DType::kOther, 1},
    {"BOOL", DType::kOther, 1},
    {"U8", DType::kOther, 1},
    {"I8", DType::kOther, 1},
    {"I16", DType::kOther, 2},
    {"U16", DType::kOther, 2},
    {"U32", DType::kOther, 4},
    {"U64", DType::kOther, 8},
}};

const DTypeEntry* FindDType(std::string_view name) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

absl::Status TensorError(std::string_view source, std::string_view tensor, std::string_view what) {
  return absl::InvalidArgumentError(
      model_internal::Cat(source, ": tensor \"", tensor, "\": ", what));
}

absl::StatusOr<std::vector<int64_t>> ParseShape(const json& entry, std::string_view source,
                                                std::string_view name) {
  auto it = entry.find("shape");
  if (it == entry.end() || !it->is_array()) {
    return TensorError(source, name, "\"shape\" is missing or not a list");
  }
  std::vector<int64_t> shape;
  int64_t elements = 1;
  for (const json& dim : *it) {
    int64_t d = -1;
    if (!model_internal::JsonToInt64(dim, &d) || d < 0) {
      return TensorError(source, name, "\"shape\" must hold non-negative integers");
    }
    if (__builtin_mul_overflow(elements, d, &elements)) {
      return TensorError(source, name, "\"shape\" element count overflows");
    }
    shape.push_back(d);
  }
  return shape;
}

absl::Status ParseOffsets(const json& entry, std::string_view source, std::string_view name,
                          uint64_t data_size, TensorInfo* info) {
  auto it = entry.find("data_offsets");
  int64_t begin = -1, end = -1;
  if (it == entry.end() || !it->is_array() || it->size() != 2 ||
      !model_internal::JsonToInt64((*it)[0], &begin) ||
      !model_internal::JsonToInt64((*it)[1], &end) || begin < 0 || end < 0) {
    return TensorError(source, name,
                       "\"data_offsets\" must be a list of two non-negative integers");
  }
  if (begin > end || static_cast<uint64_t>(end) > data_size) {
    return TensorError(
        source, name,
        model_internal::Cat("data_offsets [", begin, ", ", end,
                            "] out of range of the data section (", data_size, " bytes)"));
  }
  info->data_begin = static_cast<uint64_t>(begin);
  info->data_end = static_cast<uint64_t>(end);
  return absl::OkStatus();
}

absl::StatusOr<TensorInfo> ParseTensor(const std::string& name, const json& entry,
                                       uint64_t data_size, std::string_view source) {
  if (!entry.is_object()) return TensorError(source, name, "entry must be an object");
  TensorInfo info;
  info.name = name;
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    return TensorError(source, name, "\"dtype\" is missing or not a string");
  }
  info.dtype_name = dtype->get<std::string>();
  const DTypeEntry* known = FindDType(info.dtype_name);
  info.dtype = known != nullptr ? known->dtype : DType::kOther;
  MODEL_ASSIGN_OR_RETURN(info.shape, ParseShape(entry, source, name));
  MODEL_RETURN_IF_ERROR(ParseOffsets(entry, source, name, data_size, &info));
  if (known == nullptr) return info;  // element size unknown: bounds checked only
  uint64_t expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(info.num_elements()),
                             static_cast<uint64_t>(known->size), &expected) ||
      expected != info.data_end - info.data_begin) {
    return TensorError(
        source, name,
        model_internal::Cat("byte length ", info.data_end - info.data_begin, " does not match ",
                            info.dtype_name, " shape [", absl::StrJoin(info.shape, ", "), "]"));
  }
  return info;
}

absl::Status ParseMetadata(const json& value, std::string_view source,
                           std::map<std::string, std::string>* metadata) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        model_internal::Cat(source, ": __metadata__ must be an object"));
  }
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return absl::InvalidArgumentError(
          model_internal::Cat(source, ": __metadata__.", key, " must be a string"));
    }
    (*metadata)[key] = item.get<std::string>();
  }
  return absl::OkStatus();
}

// Tensors must not share bytes: a writer bug there silently aliases weights.
absl::Status CheckNoOverlap(const std::map<std::string, TensorInfo>& tensors,
                            std::string_view source) {
  std::vector<const TensorInfo*> sorted;
  for (const auto& [name, info] : tensors) {
    if (info.data_end > info.data_begin) sorted.push_back(&info);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->data_begin < b->data_begin; });
  const TensorInfo* furthest = nullptr;  // the tensor ending last so far
  for (const TensorInfo* info : sorted) {
    if (furthest != nullptr && info->data_begin < furthest->data_end) {
      return absl::InvalidArgumentError(model_internal::Cat(source, ": tensors \"", furthest->name,
                                                            "\" and \"", info->name,
                                                            "\" overlap in the data section"));
    }
    if (furthest == nullptr || info->data_end > furthest->data_end) furthest = info;
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view DTypeName(DType d) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.dtype == d && d != DType::kOther) return e.name;
  }
  return "other";
}

size_t DTypeSize(DType d) {
  if (d == DType::kOther) return 0;
  for (const DTypeEntry& e : kDTypes) {
    if (e.dtype == d) return e.size;
  }
  return 0;
}

int64_t TensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::string_view bytes, uint64_t file_size,
                                                         std::string_view source) {
  auto fail = [&](std::string_view what) {
    return absl::InvalidArgumentError(model_internal::Cat(source, ": ", what));
  };
  if (bytes.size() > file_size) return fail("buffer is larger than the file size");
  if (bytes.size() < kLengthPrefixBytes) {
    return fail(
        model_internal::Cat("file of ", file_size, " bytes is too small for a safetensors header"));
  }
  uint64_t header_len = 0;
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) {
    header_len |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  if (header_len > kMaxHeaderBytes) {
    return fail(model_internal::Cat("header length ", header_len, " exceeds the ", kMaxHeaderBytes,
                                    "-byte limit"));
  }
  if (header_len > file_size - kLengthPrefixBytes) {
    return fail(model_internal::Cat("header length ", header_len,
                                    " runs past the end of the file (", file_size,
                                    " bytes); truncated?"));
  }
  if (header_len > bytes.size() - kLengthPrefixBytes) {
    return fail(
        model_internal::Cat("only ", bytes.size(), " bytes given for a header of ", header_len));
  }
  SafetensorsHeader header;
  header.data_offset = kLengthPrefixBytes + header_len;
  const uint64_t data_size = file_size - header.data_offset;
  MODEL_ASSIGN_OR_RETURN(
      json doc, model_internal::ParseJson(bytes.substr(kLengthPrefixBytes, header_len), source));
  if (!doc.is_object()) return fail("header must be a JSON object");
  for (const auto& [name, entry] : doc.items()) {
    if (name == "__metadata__") {
      MODEL_RETURN_IF_ERROR(ParseMetadata(entry, source, &header.metadata));
      continue;
    }
    if (name.empty()) return fail("a tensor has an empty name");
    MODEL_ASSIGN_OR_RETURN(header.tensors[name], ParseTensor(name, entry, data_size, source));
  }
  MODEL_RETURN_IF_ERROR(CheckNoOverlap(header.tensors, source));
  return header;
}

}  // namespace gemma
