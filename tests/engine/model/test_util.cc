#include "tests/engine/model/test_util.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/model/safetensors.h"

namespace gemma::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "gemma_model_test_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  EXPECT_TRUE(out.good()) << "cannot write " << path;
}

nlohmann::json ReadJson(const std::string& path) { return nlohmann::json::parse(ReadFile(path)); }

void WriteJson(const std::string& path, const nlohmann::json& value) {
  WriteFile(path, value.dump(2));
}

std::string EncodeRaw(const std::string& header, size_t data_bytes) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  out += header;
  out.append(data_bytes, '\0');
  return out;
}

std::string EncodeSafetensors(const std::vector<Blob>& blobs) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const Blob& b : blobs) {
    header[b.name] = {{"dtype", b.dtype},
                      {"shape", b.shape},
                      {"data_offsets", {data.size(), data.size() + b.bytes.size()}}};
    data += b.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // writers pad to 8 for alignment
  return EncodeRaw(text, 0) + data;
}

std::vector<Blob> ReadBlobs(const std::string& path) {
  std::vector<Blob> blobs;
  auto file = SafetensorsFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return blobs;
  for (const auto& [name, info] : (*file)->header().tensors) {
    const char* begin = reinterpret_cast<const char*>((*file)->data(info));
    blobs.push_back(
        {name, info.dtype_name, info.shape, std::string(begin, info.data_end - info.data_begin)});
  }
  return blobs;
}

Blob* FindBlob(std::vector<Blob>& blobs, const std::string& name) {
  for (Blob& b : blobs) {
    if (b.name == name) return &b;
  }
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

void RemoveBlob(std::vector<Blob>& blobs, const std::string& name) {
  auto it =
      std::remove_if(blobs.begin(), blobs.end(), [&](const Blob& b) { return b.name == name; });
  EXPECT_NE(it, blobs.end()) << "no tensor " << name;
  blobs.erase(it, blobs.end());
}

void WriteModelDir(const std::string& src, const std::string& dst, const std::vector<Blob>& blobs) {
  fs::create_directories(dst);
  fs::copy_file(src + "/config.json", dst + "/config.json", fs::copy_options::overwrite_existing);
  if (fs::exists(src + "/generation_config.json")) {
    fs::copy_file(src + "/generation_config.json", dst + "/generation_config.json",
                  fs::copy_options::overwrite_existing);
  }
  WriteFile(dst + "/model.safetensors", EncodeSafetensors(blobs));
}

}  // namespace gemma::test
