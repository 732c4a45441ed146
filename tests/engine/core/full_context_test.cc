// Filling the whole context through the engine (CPU backend): a prompt and
// output of exactly max_context tokens finish with kLength, on the demo
// model and on the tiny one, also when the KV pool holds just one such
// sequence and a second one must wait for it.
#include <random>

#include "engine/model/config.h"
#include "tests/engine/core/admission_test_util.h"

namespace gemma {
namespace {

using namespace std::chrono_literals;
using testing::Collector;
using testing::EngineShape;

constexpr int kMaxOutput = 8;

struct Model {
  std::string name;
  std::string dir;
  friend void PrintTo(const Model& m, std::ostream* os) { *os << m.name; }
};

class FullContextTest : public ::testing::TestWithParam<Model> {
 protected:
  void SetUp() override {
    auto tok = Tokenizer::Load(GetParam().dir + "/tokenizer.model");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
    auto config = LoadModelConfig(GetParam().dir);
    ASSERT_TRUE(config.ok()) << config.status();
    max_context_ = config->max_position_embeddings;
  }
  GenerationRequest FillingRequest(uint32_t seed) const {
    std::mt19937 rng(seed);
    GenerationRequest r;
    r.prompt_ids.resize(max_context_ - kMaxOutput);
    for (int32_t& id : r.prompt_ids) id = 3 + static_cast<int32_t>(rng() % 1000);
    r.prompt_ids[0] = 2;
    r.sampling.temperature = 0.0f;
    r.stopping.max_tokens = kMaxOutput;
    r.stopping.ignore_eos = true;
    return r;
  }
  void ExpectFilled(const testing::Outcome& o) const {
    EXPECT_EQ(o.last.finish_reason, FinishReason::kLength) << o.last.error;
    EXPECT_EQ(o.last.usage.prompt_tokens + o.last.usage.completion_tokens, max_context_);
    EXPECT_EQ(static_cast<int>(o.ids.size()), kMaxOutput);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  int max_context_ = 0;
};

// Two sequences of the whole context with a pool of exactly one: the second
// waits for the first's blocks, then fills the pool itself.
TEST_P(FullContextTest, PromptPlusOutputFillsTheContextWithAPoolOfOne) {
  const EngineShape shape{.model_dir = GetParam().dir,
                          .max_slots = 2,
                          .max_context = max_context_,
                          .block_size = 16,
                          .num_blocks = max_context_ / 16,
                          .max_tokens_per_step = 512};
  auto engine = testing::MakeEngine(shape, tokenizer_.get());
  ASSERT_NE(engine, nullptr);
  Collector c(engine.get());
  ASSERT_TRUE(c.Submit(FillingRequest(1)).ok());
  ASSERT_TRUE(c.Submit(FillingRequest(2)).ok());
  // One token more than the context is refused by name.
  GenerationRequest over = FillingRequest(3);
  over.stopping.max_tokens = kMaxOutput + 1;
  EXPECT_EQ(engine->Submit(over, [](GenerationEvent&&) {}).code(), absl::StatusCode::kInvalidArgument);
  if (!c.WaitAll(300s)) {
    engine->Shutdown(0ms);
    FAIL() << "a whole-context request never finished";
  }
  ExpectFilled(c.outcome(0));
  ExpectFilled(c.outcome(1));
  testing::ExpectPoolFull(*engine);
}

INSTANTIATE_TEST_SUITE_P(Models, FullContextTest,
                         ::testing::Values(Model{"fortunes", testing::kFortunesDir},
                                           Model{"tiny_random", testing::kTinyDir}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace gemma
