// Replays every file of the fuzz corpus through the parsers, so a normal
// (g++, unsanitized) test run keeps exercising past crashers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"

namespace gemma {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> CorpusFiles(const std::string& name) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(fs::path(GEMMA_FUZZ_CORPUS) / name)) {
    if (entry.is_regular_file()) files.push_back(entry.path().string());
  }
  return files;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(FuzzCorpusTest, SafetensorsHeader) {
  const auto files = CorpusFiles("safetensors_header");
  EXPECT_GE(files.size(), 5u);
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const std::string bytes = Read(path);
    fuzz::FuzzSafetensorsHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
}

TEST(FuzzCorpusTest, ModelConfig) {
  const auto files = CorpusFiles("model_config");
  EXPECT_GE(files.size(), 3u);
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const std::string text = Read(path);
    fuzz::FuzzModelConfig(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  }
}

}  // namespace
}  // namespace gemma
