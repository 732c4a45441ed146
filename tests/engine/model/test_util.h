// Helpers for model-loading tests: temp dirs, safetensors writing, fixture
// copies. Malformed inputs are generated from these, never committed.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gemma::test {

inline std::string FortunesDir() { return GEMMA_MODELS_DIR "/gemma4-fortunes"; }
inline std::string TinyRandomDir() { return GEMMA_TEST_DATA "/gemma4-tiny-random"; }
inline std::string Real31bDir() { return GEMMA_TEST_DATA "/gemma4-31b"; }

// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& contents);
nlohmann::json ReadJson(const std::string& path);
void WriteJson(const std::string& path, const nlohmann::json& value);

// One tensor to write: dtype as spelled in safetensors, raw little-endian bytes.
struct Blob {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A well-formed safetensors file holding `blobs`, packed in order.
std::string EncodeSafetensors(const std::vector<Blob>& blobs);
// The 8-byte length prefix, `header` verbatim, then `data_bytes` zero bytes.
std::string EncodeRaw(const std::string& header, size_t data_bytes);
// All tensors of a safetensors file, in name order.
std::vector<Blob> ReadBlobs(const std::string& path);
Blob* FindBlob(std::vector<Blob>& blobs, const std::string& name);
void RemoveBlob(std::vector<Blob>& blobs, const std::string& name);

// Copies config.json (and generation_config.json if any) of `src` into a
// directory and writes `blobs` as its model.safetensors.
void WriteModelDir(const std::string& src, const std::string& dst, const std::vector<Blob>& blobs);

}  // namespace gemma::test
