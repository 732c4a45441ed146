// Checkpoint: one model.safetensors, or the shards of model.safetensors.index.json.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "engine/model/json_fields.h"
#include "engine/model/safetensors.h"
#include "engine/model/status_macros.h"
#include "engine/model/str_cat.h"

namespace gemma {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kSingleFile = "model.safetensors";
constexpr std::string_view kIndexFile = "model.safetensors.index.json";

// weight_map: tensor name -> shard file name (relative to the model dir).
absl::StatusOr<std::map<std::string, std::string>> ReadWeightMap(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(model_internal::Cat("cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  MODEL_ASSIGN_OR_RETURN(json doc, model_internal::ParseJson(text.str(), path));
  model_internal::JsonFields root(doc, path, "");
  MODEL_ASSIGN_OR_RETURN(model_internal::JsonFields weight_map, root.Object("weight_map"));
  std::map<std::string, std::string> result;
  for (const auto& [tensor, shard] : weight_map.object().items()) {
    if (!shard.is_string()) return weight_map.Error(tensor, "must be a file name");
    const std::string name = shard.get<std::string>();
    // Shards live beside the index; anything else is a malformed index.
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      return weight_map.Error(tensor,
                              model_internal::Cat("names \"", name, "\", not a shard file"));
    }
    result[tensor] = name;
  }
  if (result.empty()) return root.Error("weight_map", "is empty");
  return result;
}

// What Checkpoint::Open assembles before moving it into the Checkpoint.
struct OpenedFiles {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, TensorRef> tensors;
};

// Opens the shards of `index_path` and checks each holds exactly the
// tensors the index assigns to it.
absl::StatusOr<OpenedFiles> OpenShards(const fs::path& dir, const std::string& index_path) {
  MODEL_ASSIGN_OR_RETURN(auto weight_map, ReadWeightMap(index_path));
  std::set<std::string> shard_names;
  for (const auto& [tensor, shard] : weight_map) shard_names.insert(shard);
  OpenedFiles opened;
  for (const std::string& shard : shard_names) {
    const std::string shard_path = (dir / shard).string();
    std::error_code ec;
    if (!fs::exists(shard_path, ec)) {
      return absl::NotFoundError(
          model_internal::Cat(index_path, " lists shard ", shard, ", which does not exist"));
    }
    MODEL_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(shard_path));
    for (const auto& [name, info] : file->header().tensors) {
      auto listed = weight_map.find(name);
      if (listed == weight_map.end()) {
        return absl::InvalidArgumentError(model_internal::Cat(
            "tensor ", name, " is in ", shard_path, " but not listed in ", index_path));
      }
      if (listed->second != shard) {
        return absl::InvalidArgumentError(
            model_internal::Cat("tensor ", name, " is in ", shard_path, " but ", index_path,
                                " assigns it to ", (dir / listed->second).string()));
      }
      opened.tensors[name] = TensorRef{&info, file.get()};
    }
    opened.files.push_back(std::move(file));
  }
  for (const auto& [tensor, shard] : weight_map) {
    if (opened.tensors.count(tensor) == 0) {
      return absl::InvalidArgumentError(model_internal::Cat(
          index_path, " maps tensor ", tensor, " to ", shard, ", which does not contain it"));
    }
  }
  return opened;
}

absl::StatusOr<OpenedFiles> OpenSingle(const std::string& path) {
  OpenedFiles opened;
  MODEL_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
  for (const auto& [name, info] : file->header().tensors) {
    opened.tensors[name] = TensorRef{&info, file.get()};
  }
  opened.files.push_back(std::move(file));
  return opened;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& model_dir) {
  const fs::path dir(model_dir);
  const std::string single_path = (dir / kSingleFile).string();
  const std::string index_path = (dir / kIndexFile).string();
  std::error_code ec;
  absl::StatusOr<OpenedFiles> opened;
  // Like transformers: a single file wins over an index next to it.
  if (fs::exists(single_path, ec)) {
    opened = OpenSingle(single_path);
  } else if (fs::exists(index_path, ec)) {
    opened = OpenShards(dir, index_path);
  } else {
    return absl::NotFoundError(
        model_internal::Cat("no ", kSingleFile, " or ", kIndexFile, " in ", model_dir));
  }
  if (!opened.ok()) return opened.status();
  auto checkpoint = std::unique_ptr<Checkpoint>(new Checkpoint());
  checkpoint->files_ = std::move(opened->files);
  checkpoint->tensors_ = std::move(opened->tensors);
  return checkpoint;
}

const TensorRef* Checkpoint::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, ref] : tensors_) total += ref.info->data_end - ref.info->data_begin;
  return total;
}

}  // namespace gemma
