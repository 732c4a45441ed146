// Reads a fixture's golden outputs: golden.json (prompt ids, greedy tokens,
// margins, optionally prefill_rows) and golden.safetensors (prefill and step logits, fp32), the latter
// with the project's own safetensors reader.
#pragma once

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model/safetensors.h"
#include "nlohmann/json.hpp"

namespace gemma::gpu_test {

struct GoldenPrompt {
  std::vector<int32_t> ids;
  std::vector<int32_t> greedy;
  std::vector<double> margins;
  // Positions whose prefill logits are stored: golden.json's prefill_rows
  // (large fixtures keep a few), else every position of the prompt.
  std::vector<int> prefill_rows;
  std::vector<float> prefill_logits;  // [prefill_rows.size(), vocab]
  std::vector<float> step_logits;     // [greedy.size(), vocab]
};

inline std::vector<float> ReadF32(const SafetensorsFile& f, const std::string& name) {
  auto it = f.header().tensors.find(name);
  if (it == f.header().tensors.end()) return {};
  std::vector<float> v(it->second.num_elements());
  std::memcpy(v.data(), f.data(it->second), v.size() * sizeof(float));
  return v;
}

// Empty on any error (the caller's ASSERT names the directory).
inline std::vector<GoldenPrompt> LoadGolden(const std::string& dir) {
  std::ifstream in(dir + "/golden.json");
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  auto file = SafetensorsFile::Open(dir + "/golden.safetensors");
  if (j.is_discarded() || !file.ok()) return {};
  std::vector<GoldenPrompt> out;
  for (size_t i = 0; i < j["prompts"].size(); ++i) {
    const auto& p = j["prompts"][i];
    GoldenPrompt g;
    g.ids = p["ids"].get<std::vector<int32_t>>();
    g.greedy = p["greedy"].get<std::vector<int32_t>>();
    g.margins = p["margins"].get<std::vector<double>>();
    if (p.contains("prefill_rows")) {
      g.prefill_rows = p["prefill_rows"].get<std::vector<int>>();
    } else {
      for (size_t r = 0; r < g.ids.size(); ++r) g.prefill_rows.push_back(int(r));
    }
    const std::string key = "prompt" + std::to_string(i);
    g.prefill_logits = ReadF32(**file, key + ".prefill_logits");
    g.step_logits = ReadF32(**file, key + ".step_logits");
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace gemma::gpu_test
