// Test data of the tokenizer tests: the fixture tokenizers and goldens copied
// into tests/data/tokenizers (see /tests/data/tokenizers/README.md).
#pragma once

#include <zlib.h>

#include <fstream>
#include <sstream>
#include <string>

namespace gemma::testing_data {

inline const std::string kTokenizerData = std::string(GEMMA_TEST_DATA) + "/tokenizers";

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The whole of a .gz file, or "" when it cannot be read.
inline std::string ReadGzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return "";
  std::string text;
  char buffer[1 << 16];
  int read = 0;
  while ((read = gzread(file, buffer, sizeof(buffer))) > 0) text.append(buffer, read);
  gzclose(file);
  return read < 0 ? "" : text;
}

}  // namespace gemma::testing_data
