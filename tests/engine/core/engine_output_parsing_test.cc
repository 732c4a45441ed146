// Output parsing inside the engine: a backend that plays a scripted Gemma 4
// answer (thought channel, text, tool calls, then <turn|>) over the CPU
// backend's logits, and the events a request with output_parsing receives.
#include <condition_variable>
#include <mutex>

#include "engine/core/engine.h"
#include "engine/factory/backend_factory.h"
#include "gtest/gtest.h"

namespace gemma {
namespace {

const std::string kModel = GEMMA_MODELS_DIR "/gemma4-fortunes";

// The CPU backend whose last-row logits are overwritten so that greedy
// decoding picks script[p - prompt_length] after position p. One sequence.
class ScriptedBackend final : public Backend {
 public:
  ScriptedBackend(std::unique_ptr<Backend> inner, int prompt_length, std::vector<int32_t> script)
      : inner_(std::move(inner)), prompt_length_(prompt_length), script_(std::move(script)) {}
  const ModelConfig& config() const override { return inner_->config(); }
  std::string name() const override { return "cpu-scripted"; }
  int max_slots() const override { return inner_->max_slots(); }
  int max_context() const override { return inner_->max_context(); }
  KvCacheSpec kv_cache_spec() const override { return inner_->kv_cache_spec(); }
  void ResetSlot(int slot) override { inner_->ResetSlot(slot); }
  absl::Status Forward(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                       ForwardResult* out) override {
    if (absl::Status s = inner_->Forward(chunks, rows, out); !s.ok()) return s;
    const bool logits = WantsLogits(chunks);
    for (size_t i = 0; i < chunks.size(); ++i) {
      const int next = chunks[i].start_position + static_cast<int>(chunks[i].token_ids.size()) -
                       prompt_length_;
      if (next < 0 || next >= static_cast<int>(script_.size())) continue;
      out->next_ids[i] = script_[next];
      if (logits) out->LastLogits(chunks, i, config().vocab_size)[script_[next]] = 1e9f;
    }
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<Backend> inner_;
  int prompt_length_;
  std::vector<int32_t> script_;
};

struct Collected {
  std::string text, reasoning;
  std::vector<ToolCall> tool_calls;
  std::vector<std::string> order;  // "r" / "t" / "c" per non-empty part, in arrival order
  GenerationEvent last;
};

class EngineOutputParsingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // tokenizer.model: its control pieces include <|channel> and <channel|>.
    auto tok = Tokenizer::Load(kModel + "/tokenizer.model");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
  }

  // Runs one greedy request whose output is `answer` (text with Gemma's
  // markers) followed by <turn|>.
  Collected Run(const std::string& answer, bool parse, bool skip_special = true) {
    std::vector<int32_t> prompt = *tokenizer_->EncodePrompt("Weather?");
    std::vector<int32_t> script = *tokenizer_->Encode(answer);
    // SentencePiece's dummy prefix: a lone "▁" before the leading marker.
    if (!script.empty() && tokenizer_->IdToPiece(script[0]) == "\xE2\x96\x81") {
      script.erase(script.begin());
    }
    script.push_back(tokenizer_->special().turn_end);
    BackendOptions bo;
    bo.backend = "cpu";
    bo.model_dir = kModel;
    bo.max_slots = 1;
    bo.max_context = 512;
    auto inner = CreateBackend(bo);
    EXPECT_TRUE(inner.ok());
    auto backend = std::make_unique<ScriptedBackend>(std::move(*inner),
                                                     static_cast<int>(prompt.size()), script);
    auto engine = Engine::Create(EngineOptions{}, std::move(backend), tokenizer_.get());
    EXPECT_TRUE(engine.ok());
    GenerationRequest r;
    r.prompt_ids = prompt;
    r.sampling.temperature = 0;
    r.stopping.max_tokens = static_cast<int>(script.size()) + 4;
    r.stopping.stop_token_ids = {tokenizer_->special().turn_end};
    r.skip_special_tokens = skip_special;
    if (parse) r.output_parsing = OutputParserOptions{};
    Collected got;
    std::mutex mu;
    std::condition_variable done;
    bool finished = false;
    EXPECT_TRUE((*engine)->Submit(r, [&](GenerationEvent&& ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (!ev.reasoning_delta.empty()) got.order.push_back("r");
      if (!ev.text_delta.empty()) got.order.push_back("t");
      if (!ev.tool_calls.empty()) got.order.push_back("c");
      got.text += ev.text_delta;
      got.reasoning += ev.reasoning_delta;
      got.tool_calls.insert(got.tool_calls.end(), ev.tool_calls.begin(), ev.tool_calls.end());
      if (ev.finished) {
        got.last = std::move(ev);
        finished = true;
        done.notify_all();
      }
    }).ok());
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(done.wait_for(lock, std::chrono::seconds(60), [&] { return finished; }));
    return got;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

const std::string kAnswer =
    "<|channel>thought\nThe user wants Paris.<channel|>Checking now."
    "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>";

TEST_F(EngineOutputParsingTest, ThoughtsTextAndToolCallsArriveApart) {
  const Collected got = Run(kAnswer, /*parse=*/true);
  EXPECT_EQ(got.reasoning, "The user wants Paris.");
  EXPECT_EQ(got.text, "Checking now.");
  ASSERT_EQ(got.tool_calls.size(), 1u);
  EXPECT_EQ(got.tool_calls[0].name, "get_weather");
  EXPECT_EQ(got.tool_calls[0].arguments.dump(), R"({"city":"Paris","days":3})");
  EXPECT_EQ(got.last.finish_reason, FinishReason::kToolCalls);
  // Reasoning streamed before the text, the call last.
  ASSERT_FALSE(got.order.empty());
  EXPECT_EQ(got.order.front(), "r");
  EXPECT_EQ(got.order.back(), "c");
}

TEST_F(EngineOutputParsingTest, WithoutParsingTheMarkupIsText) {
  const Collected raw = Run(kAnswer, /*parse=*/false, /*skip_special=*/false);
  EXPECT_EQ(raw.text, kAnswer);
  EXPECT_TRUE(raw.reasoning.empty());
  EXPECT_TRUE(raw.tool_calls.empty());
  EXPECT_EQ(raw.last.finish_reason, FinishReason::kStopToken);
  // skip_special_tokens drops the control pieces (the fortunes vocabulary
  // has <|channel> and <channel|> as control pieces).
  const Collected skipped = Run(kAnswer, /*parse=*/false, /*skip_special=*/true);
  EXPECT_EQ(skipped.text.find("<|channel>"), std::string::npos);
  EXPECT_NE(skipped.text.find("Checking now."), std::string::npos);
}

TEST_F(EngineOutputParsingTest, TruncatedCallComesBackAsText) {
  const std::string cut = "Sure.<|tool_call>call:get_weather{city:<|\"|>Par";
  const Collected got = Run(cut, /*parse=*/true);
  EXPECT_TRUE(got.tool_calls.empty());
  EXPECT_NE(got.text.find("call:get_weather{city:"), std::string::npos) << got.text;
  EXPECT_EQ(got.last.finish_reason, FinishReason::kStopToken);
}

}  // namespace
}  // namespace gemma
