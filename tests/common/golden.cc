#include "tests/common/golden.h"

#include <fstream>
#include <sstream>

#include "engine/model/weights.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gemma::testing {
namespace {

std::vector<float> ReadTensor(const SafetensorsFile& file, const std::string& name, int64_t expected) {
  auto it = file.header().tensors.find(name);
  EXPECT_NE(it, file.header().tensors.end()) << "golden tensor " << name << " missing";
  if (it == file.header().tensors.end()) return {};
  EXPECT_EQ(it->second.num_elements(), expected) << name;
  TensorRef ref{&it->second, &file};
  std::vector<float> out(it->second.num_elements());
  ConvertToFloat(ref, out);
  return out;
}

}  // namespace

Golden LoadGolden(const std::string& model_dir, int vocab_size) {
  Golden golden;
  golden.vocab_size = vocab_size;
  std::ifstream in(model_dir + "/golden.json");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str());
  auto file = SafetensorsFile::Open(model_dir + "/golden.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return golden;
  int i = 0;
  for (const auto& p : j.at("prompts")) {
    GoldenPrompt g;
    auto str = [&](const char* key) {
      return p.contains(key) && p[key].is_string() ? p[key].get<std::string>() : std::string();
    };
    g.kind = str("kind");
    g.text = str("text");
    g.ids = p.at("ids").get<std::vector<int32_t>>();
    g.greedy = p.at("greedy").get<std::vector<int32_t>>();
    g.greedy_text = str("greedy_text");
    g.margins = p.at("margins").get<std::vector<double>>();
    const std::string prefix = "prompt" + std::to_string(i++);
    g.prefill_logits = ReadTensor(**file, prefix + ".prefill_logits", int64_t(g.ids.size()) * vocab_size);
    g.step_logits = ReadTensor(**file, prefix + ".step_logits", int64_t(g.greedy.size()) * vocab_size);
    golden.prompts.push_back(std::move(g));
  }
  return golden;
}

size_t FirstLowMarginStep(const GoldenPrompt& prompt, double min_margin) {
  for (size_t s = 0; s < prompt.margins.size(); ++s)
    if (prompt.margins[s] < min_margin) return s;
  return prompt.margins.size();
}

}  // namespace gemma::testing
