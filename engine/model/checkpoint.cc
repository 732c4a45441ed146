// Checkpoint: one model.safetensors, or the shards of model.safetensors.index.json.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "engine/model/str_cat.h"
#include "engine/model/json_fields.h"
#include "engine/model/safetensors.h"
#include "engine/model/status_macros.h"

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
      return weight_map.Error(tensor, model_internal::Cat("names \"", name, "\", not a shard file"));
    }
    result[tensor] = name;
  }
  if (result.empty()) return root.Error("weight_map", "is empty");
  return result;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& model_dir) {
  auto checkpoint = std::unique_ptr<Checkpoint>(new Checkpoint());
  const fs::path dir(model_dir);
  std::error_code ec;
  if (fs::exists(dir / kSingleFile, ec)) {
    MODEL_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open((dir / kSingleFile).string()));
    for (const auto& [name, info] : file->header().tensors) {
      checkpoint->tensors_[name] = TensorRef{&info, file.get()};
    }
    checkpoint->files_.push_back(std::move(file));
    return checkpoint;
  }
  const std::string index_path = (dir / kIndexFile).string();
  if (!fs::exists(index_path, ec)) {
    return absl::NotFoundError(model_internal::Cat("no ", kSingleFile, " or ", kIndexFile, " in ",
                                            model_dir));
  }
  MODEL_ASSIGN_OR_RETURN(auto weight_map, ReadWeightMap(index_path));
  std::set<std::string> shard_names;
  for (const auto& [tensor, shard] : weight_map) shard_names.insert(shard);
  for (const std::string& shard : shard_names) {
    const std::string shard_path = (dir / shard).string();
    if (!fs::exists(shard_path, ec)) {
      return absl::NotFoundError(model_internal::Cat(index_path, " lists shard ", shard,
                                              ", which does not exist"));
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
      checkpoint->tensors_[name] = TensorRef{&info, file.get()};
    }
    checkpoint->files_.push_back(std::move(file));
  }
  for (const auto& [tensor, shard] : weight_map) {
    if (checkpoint->tensors_.count(tensor) == 0) {
      return absl::InvalidArgumentError(model_internal::Cat(index_path, " maps tensor ", tensor, " to ",
                                                     shard, ", which does not contain it"));
    }
  }
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
