// safetensors reading: header parsing (pure, fuzzable) and mmap'ed files.
//
// Thread-safety: a parsed SafetensorsFile is immutable and may be read from
// any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gemma {

enum class DType { kBF16, kF16, kF32, kF8E4M3, kI32, kI64, kOther };

std::string_view DTypeName(DType d);
size_t DTypeSize(DType d);  // bytes per element; 0 for kOther

struct TensorInfo {
  std::string name;
  DType dtype = DType::kOther;
  std::string dtype_name;        // as written in the header
  std::vector<int64_t> shape;
  uint64_t data_begin = 0;       // offsets relative to the data section
  uint64_t data_end = 0;
  int64_t num_elements() const;
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;      // absolute file offset of the data section
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};

// Parses the header of a safetensors file held in `bytes` (the whole file, or
// at least its header; `file_size` is the full size). Validates: header length
// within the file, JSON shape, known fields, dtype/shape vs byte length,
// offsets within the data section, no overlapping tensors. `source` names the
// file in error messages. Never crashes on any input (fuzzed).
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    std::string_view bytes, uint64_t file_size, std::string_view source);

// A memory-mapped safetensors file.
class SafetensorsFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Tensors held in memory instead of a mapped file (a tensor-parallel
  // rank's slices of a checkpoint): header.tensors' byte ranges index `data`
  // (header.data_offset is ignored).
  static std::unique_ptr<SafetensorsFile> FromMemory(std::string name, SafetensorsHeader header,
                                                     std::vector<std::byte> data);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  // Start of the tensor's bytes in the mapping. REQUIRES: info from header().
  const std::byte* data(const TensorInfo& info) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  SafetensorsHeader header_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::vector<std::byte> owned_;  // FromMemory's bytes (map_ is then null)
};

// A tensor found in a checkpoint: its description and where its bytes live.
struct TensorRef {
  const TensorInfo* info = nullptr;
  const SafetensorsFile* file = nullptr;
  const std::byte* data() const { return file->data(*info); }
};

// All safetensors files of a checkpoint directory: `model.safetensors`, or the
// shards listed by `model.safetensors.index.json` (each shard must exist and
// hold exactly the tensors the index assigns to it).
class Checkpoint {
 public:
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& model_dir);
  // nullptr when absent.
  const TensorRef* Find(const std::string& name) const;
  const std::map<std::string, TensorRef>& tensors() const { return tensors_; }
  uint64_t total_bytes() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorRef> tensors_;
};

}  // namespace gemma
