// Replays the Generate-request fuzz corpus through the server's validation,
// so a normal (g++, unsanitized) test run keeps exercising past crashers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/fuzz/request_fuzz_target.h"

namespace gemma {
namespace {

TEST(RequestFuzzCorpusTest, GenerateRequest) {
  int num_files = 0;
  const auto dir = std::filesystem::path(GEMMA_FUZZ_CORPUS) / "generate_request";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    SCOPED_TRACE(entry.path().string());
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    const std::string data = bytes.str();
    fuzz::FuzzGenerateRequest(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    ++num_files;
  }
  EXPECT_GE(num_files, 5);
}

}  // namespace
}  // namespace gemma
