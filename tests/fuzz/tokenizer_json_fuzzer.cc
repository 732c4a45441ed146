// Fuzzing of the tokenizer.json / tokenizer_config.json parsers and of the
// BPE tokenizer they build. One body, two entry points:
// - libFuzzer (GEMMA_BUILD_FUZZERS, clang): LLVMFuzzerTestOneInput;
// - tokenizer_json_fuzz_corpus_test (always built): replays
//   corpus/tokenizer_json through the same body under gtest.
// Beyond "does not crash", a tokenizer that loads must encode its own input
// (when it is UTF-8) into ids it can name, and decode them.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/tokenizer/bpe_tokenizer_model.h"
#include "engine/tokenizer/tokenizer_config.h"
#include "engine/tokenizer/utf8.h"

namespace gemma::fuzz {
namespace {

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

void CheckEncodes(const BpeTokenizerModel& model, std::string_view text) {
  if (utf8::FirstInvalidByte(text) != std::string_view::npos) return;
  auto ids = model.Encode(text);
  Require(ids.ok());
  for (int32_t id : *ids) Require(id >= 0 && id < model.num_pieces());
  model.Decode(*ids, /*skip_special_tokens=*/false);
  model.Decode(*ids, /*skip_special_tokens=*/true);
  for (int32_t id : *ids) model.TokenBytes(id);
}

void FuzzTokenizerJson(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ParseTokenizerConfig(text, "tokenizer_config.json");
  auto model = BpeTokenizerModel::Create(text, "tokenizer.json", std::nullopt, "");
  if (!model.ok()) return;
  CheckEncodes(**model, text.substr(0, 4096));
  CheckEncodes(**model, "Hello world  <bos>\n\t\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace gemma::fuzz

#ifdef GEMMA_FUZZ_CORPUS_REPLAY
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

TEST(TokenizerJsonFuzzCorpusTest, ReplaysCorpus) {
  int num_files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(GEMMA_FUZZ_CORPUS) / "tokenizer_json")) {
    if (!entry.is_regular_file()) continue;
    SCOPED_TRACE(entry.path().string());
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    const std::string input = bytes.str();
    gemma::fuzz::FuzzTokenizerJson(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    ++num_files;
  }
  EXPECT_GE(num_files, 4);
}
#else
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gemma::fuzz::FuzzTokenizerJson(data, size);
  return 0;
}
#endif
