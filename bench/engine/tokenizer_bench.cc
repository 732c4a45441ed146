// gemma-tokenizer-bench: tokenizer load time and single-threaded encode
// throughput over a corpus (a JSON array of strings, e.g.
// tests/data/tokenizers/corpus.json). Prints a table, then one JSON line:
//   gemma-tokenizer-bench --tokenizer DIR_OR_FILE --corpus corpus.json [--repeats 20]
// A .gz tokenizer.json (as in tests/data/tokenizers) is read through zlib.
// Both wall and process CPU seconds are reported: on a shared machine the CPU
// figures are the ones that say what one core does.
#include <zlib.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "CLI/CLI.hpp"
#include "engine/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Inflates a .gz tokenizer into a temporary file the loader can read; the
// inflation is not part of the measured load time.
std::string InflateToTemp(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return "";
  const auto dir = std::filesystem::temp_directory_path() / "gemma-tokenizer-bench";
  std::filesystem::create_directories(dir);
  const std::string out_path = (dir / "tokenizer.json").string();
  std::ofstream out(out_path, std::ios::binary);
  char buffer[1 << 16];
  int read = 0;
  while ((read = gzread(file, buffer, sizeof(buffer))) > 0) out.write(buffer, read);
  gzclose(file);
  return read < 0 ? "" : out_path;
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double CpuSeconds(std::clock_t since) {
  return static_cast<double>(std::clock() - since) / CLOCKS_PER_SEC;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tokenizer load time and single-threaded encode throughput"};
  std::string tokenizer_path, corpus_path;
  int repeats = 20;
  app.add_option("--tokenizer", tokenizer_path, "model dir, tokenizer.json(.gz) or tokenizer.model")
      ->required();
  app.add_option("--corpus", corpus_path, "JSON array of strings")->required();
  app.add_option("--repeats", repeats, "passes over the corpus")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::string load_path = tokenizer_path;
  if (tokenizer_path.ends_with(".gz")) load_path = InflateToTemp(tokenizer_path);
  const auto load_start = Clock::now();
  const std::clock_t load_cpu_start = std::clock();
  auto tokenizer = gemma::Tokenizer::Load(load_path);
  const double load_seconds = Seconds(load_start);
  const double load_cpu_seconds = CpuSeconds(load_cpu_start);
  if (!tokenizer.ok()) {
    std::cerr << "gemma-tokenizer-bench: " << tokenizer.status() << "\n";
    return 1;
  }
  const nlohmann::json corpus = nlohmann::json::parse(ReadFile(corpus_path), nullptr, false);
  if (!corpus.is_array()) {
    std::cerr << "gemma-tokenizer-bench: " << corpus_path << " is not a JSON array\n";
    return 1;
  }
  std::vector<std::string> texts;
  size_t corpus_bytes = 0;
  for (const auto& item : corpus) {
    if (!item.is_string()) continue;
    texts.push_back(item.get<std::string>());
    corpus_bytes += texts.back().size();
  }
  size_t num_tokens = 0;
  const auto encode_start = Clock::now();
  const std::clock_t encode_cpu_start = std::clock();
  for (int pass = 0; pass < repeats; ++pass) {
    for (const std::string& text : texts) {
      auto ids = (*tokenizer)->Encode(text);
      if (ids.ok()) num_tokens += ids->size();
    }
  }
  const double encode_seconds = Seconds(encode_start);
  const double encode_cpu_seconds = CpuSeconds(encode_cpu_start);
  const double megabytes = static_cast<double>(corpus_bytes) * repeats / 1e6;
  const double mb_per_s = megabytes / encode_seconds;
  const double mb_per_cpu_s = megabytes / encode_cpu_seconds;

  std::printf("%-28s %12s\n", "metric", "value");
  std::printf("%-28s %12.3f\n", "load_seconds", load_seconds);
  std::printf("%-28s %12.3f\n", "load_cpu_seconds", load_cpu_seconds);
  std::printf("%-28s %12zu\n", "vocab_size", static_cast<size_t>((*tokenizer)->vocab_size()));
  std::printf("%-28s %12zu\n", "corpus_texts", texts.size());
  std::printf("%-28s %12zu\n", "corpus_bytes", corpus_bytes);
  std::printf("%-28s %12d\n", "repeats", repeats);
  std::printf("%-28s %12.3f\n", "encode_seconds", encode_seconds);
  std::printf("%-28s %12.2f\n", "encode_mb_per_s", mb_per_s);
  std::printf("%-28s %12.2f\n", "encode_mb_per_cpu_s", mb_per_cpu_s);
  std::printf("%-28s %12.1f\n", "tokens_per_pass", static_cast<double>(num_tokens) / repeats);
  const nlohmann::json result = {{"tokenizer", tokenizer_path},  {"load_seconds", load_seconds},
                                 {"load_cpu_seconds", load_cpu_seconds},
                                 {"vocab_size", (*tokenizer)->vocab_size()},
                                 {"corpus_bytes", corpus_bytes}, {"repeats", repeats},
                                 {"encode_seconds", encode_seconds},
                                 {"encode_mb_per_s", mb_per_s},
                                 {"encode_cpu_seconds", encode_cpu_seconds},
                                 {"encode_mb_per_cpu_s", mb_per_cpu_s},
                                 {"tokens_per_pass", num_tokens / repeats}};
  std::printf("%s\n", result.dump().c_str());
  return 0;
}
