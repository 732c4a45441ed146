// The engine on the CPU backend with the fortunes model: batching must not
// change results, cancels free slots, bad requests get named errors.
#include "engine/core/engine.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "engine/factory/backend_factory.h"
#include "gtest/gtest.h"

namespace gemma {
namespace {

const std::string kModel = GEMMA_MODELS_DIR "/gemma4-fortunes";

// Collects a request's events; Wait() returns the final one.
class Collector {
 public:
  EventCallback Callback() {
    return [this](GenerationEvent&& ev) {
      std::lock_guard<std::mutex> lock(mu_);
      ids_.insert(ids_.end(), ev.token_ids.begin(), ev.token_ids.end());
      request_ids_.push_back(ev.request_id);
      text_ += ev.text_delta;
      ++num_events_;
      if (ev.finished) {
        final_ = std::move(ev);
        done_ = true;
        cv_.notify_all();
      }
    };
  }
  GenerationEvent Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(120), [&] { return done_; }));
    return final_;
  }
  std::vector<int32_t> ids() { std::lock_guard<std::mutex> l(mu_); return ids_; }
  std::vector<std::string> request_ids() { std::lock_guard<std::mutex> l(mu_); return request_ids_; }
  std::string text() { std::lock_guard<std::mutex> l(mu_); return text_; }
  int num_events() { std::lock_guard<std::mutex> l(mu_); return num_events_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> ids_;
  std::vector<std::string> request_ids_;
  std::string text_;
  int num_events_ = 0;
  bool done_ = false;
  GenerationEvent final_;
};

class EngineTest : public ::testing::Test {
 protected:
  // Stats are published after each engine step, just after final events.
  static int FreeSlotsAfterSettling(Engine& engine, int expected) {
    for (int i = 0; i < 200 && engine.Stats().free_slots != expected; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return engine.Stats().free_slots;
  }

  void SetUp() override {
    auto tok = Tokenizer::Load(kModel + "/tokenizer.model");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
  }

  std::unique_ptr<Engine> MakeEngine(int slots, int tokens_per_step = 512, int max_queue = 256) {
    BackendOptions bo;
    bo.backend = "cpu";
    bo.model_dir = kModel;
    bo.max_slots = slots;
    bo.max_context = 1024;
    auto backend = CreateBackend(bo);
    EXPECT_TRUE(backend.ok()) << backend.status();
    EngineOptions eo;
    eo.max_tokens_per_step = tokens_per_step;
    eo.max_queue = max_queue;
    auto engine = Engine::Create(eo, std::move(*backend), tokenizer_.get());
    EXPECT_TRUE(engine.ok()) << engine.status();
    return std::move(*engine);
  }

  GenerationRequest Greedy(const std::string& prompt, int max_tokens) {
    GenerationRequest r;
    r.prompt_ids = *tokenizer_->EncodePrompt(prompt);
    r.sampling.temperature = 0;
    r.stopping.max_tokens = max_tokens;
    r.stopping.ignore_eos = true;
    return r;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

const char* kPrompts[] = {"The quick brown fox", "Q:\tWhat is the meaning of life?\nA:", "Love is",
                          "A fool and his money", "You will", "Never trust a", "Today is a good day to",
                          "The best way"};

TEST_F(EngineTest, BatchedGreedyEqualsOneAtATime) {
  std::vector<std::vector<int32_t>> alone;
  {
    auto engine = MakeEngine(1);
    for (const char* p : kPrompts) {
      Collector c;
      ASSERT_TRUE(engine->Submit(Greedy(p, 24), c.Callback()).ok());
      EXPECT_EQ(c.Wait().finish_reason, FinishReason::kLength);
      alone.push_back(c.ids());
    }
  }
  // 4 slots for 8 requests and a 5-token step budget: prefill chunks mix with
  // decodes and later requests wait for free slots.
  auto engine = MakeEngine(4, 5);
  std::vector<std::unique_ptr<Collector>> cs;
  for (const char* p : kPrompts) {
    cs.push_back(std::make_unique<Collector>());
    ASSERT_TRUE(engine->Submit(Greedy(p, 24), cs.back()->Callback()).ok());
  }
  for (size_t i = 0; i < cs.size(); ++i) {
    const GenerationEvent last = cs[i]->Wait();
    EXPECT_EQ(last.usage.completion_tokens, 24);
    EXPECT_EQ(cs[i]->ids(), alone[i]) << kPrompts[i];
    // The streamed text continues the prompt's: decode(prompt + output)
    // after decode(prompt).
    const std::vector<int32_t> prompt = *tokenizer_->EncodePrompt(kPrompts[i]);
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), alone[i].begin(), alone[i].end());
    EXPECT_EQ(tokenizer_->Decode(prompt) + cs[i]->text(), tokenizer_->Decode(all)) << kPrompts[i];
  }
  EXPECT_EQ(FreeSlotsAfterSettling(*engine, 4), 4);
}

TEST_F(EngineTest, SeededSamplingIsReproducibleAndSeedsDiffer) {
  auto engine = MakeEngine(2);
  auto run = [&](uint64_t seed) {
    GenerationRequest r = Greedy("Love is", 32);
    r.sampling.temperature = 1.0f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = seed;
    Collector c;
    EXPECT_TRUE(engine->Submit(r, c.Callback()).ok());
    c.Wait();
    return c.ids();
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST_F(EngineTest, StopsAtEosUnlessIgnored) {
  // The golden continuation of this prompt emits <eos> at step 17.
  auto engine = MakeEngine(1);
  GenerationRequest r = Greedy("The quick brown fox", 40);
  r.stopping.ignore_eos = false;
  Collector c;
  ASSERT_TRUE(engine->Submit(r, c.Callback()).ok());
  const GenerationEvent last = c.Wait();
  EXPECT_EQ(last.finish_reason, FinishReason::kEos);
  EXPECT_EQ(last.matched_stop_token, tokenizer_->special().eos);
  EXPECT_EQ(last.usage.completion_tokens, 18);
  EXPECT_EQ(c.text().find('\0'), std::string::npos);
}

TEST_F(EngineTest, StopStringTruncatesTextAndNamesTheMatch) {
  auto engine = MakeEngine(1);
  Collector full;
  ASSERT_TRUE(engine->Submit(Greedy("The quick brown fox", 16), full.Callback()).ok());
  full.Wait();
  const std::string text = full.text();
  const size_t at = text.find("lot");
  ASSERT_NE(at, std::string::npos) << text;
  GenerationRequest r = Greedy("The quick brown fox", 16);
  r.stopping.stop_strings = {"lot", "never-produced"};
  Collector c;
  ASSERT_TRUE(engine->Submit(r, c.Callback()).ok());
  const GenerationEvent last = c.Wait();
  EXPECT_EQ(last.finish_reason, FinishReason::kStopString);
  EXPECT_EQ(last.matched_stop, "lot");
  EXPECT_EQ(c.text(), text.substr(0, at));
}

TEST_F(EngineTest, LogprobsArePerTokenWithAlternatives) {
  auto engine = MakeEngine(1);
  GenerationRequest r = Greedy("Love is", 5);
  r.sampling.num_logprobs = 3;
  std::vector<SampleResult> got;
  std::mutex mu;
  Collector c;
  auto inner = c.Callback();
  ASSERT_TRUE(engine->Submit(r, [&](GenerationEvent&& ev) {
    { std::lock_guard<std::mutex> l(mu); got.insert(got.end(), ev.logprobs.begin(), ev.logprobs.end()); }
    inner(std::move(ev));
  }).ok());
  c.Wait();
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(got.size(), 5u);
  for (const SampleResult& s : got) {
    ASSERT_EQ(s.top.size(), 3u);
    EXPECT_EQ(s.top[0].token_id, s.token_id);  // greedy picks the best
    EXPECT_LE(s.logprob, 0.0f);
    EXPECT_GE(s.top[0].logprob, s.top[1].logprob);
  }
}

TEST_F(EngineTest, CancelFreesTheSlotWithinAStep) {
  auto engine = MakeEngine(2);
  GenerationRequest r = Greedy("The quick brown fox", 900);
  r.request_id = "long-one";
  Collector c;
  ASSERT_TRUE(engine->Submit(r, c.Callback()).ok());
  while (c.num_events() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine->Cancel("long-one");
  const GenerationEvent last = c.Wait();
  EXPECT_EQ(last.finish_reason, FinishReason::kCancelled);
  for (const std::string& id : c.request_ids()) EXPECT_EQ(id, "long-one");  // every event names it
  EXPECT_LT(last.usage.completion_tokens, 900);
  EXPECT_EQ(FreeSlotsAfterSettling(*engine, 2), 2);
  EXPECT_EQ(engine->Stats().running, 0);
}

// A request id reused right after a cancel: the cancel reaches only the
// submission made before it, however the two land in the engine's step.
TEST_F(EngineTest, CancelDoesNotReachALaterSubmissionWithTheSameId) {
  auto engine = MakeEngine(2);
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    GenerationRequest first = Greedy("The quick brown fox", 900);
    first.request_id = "reused";
    Collector a;
    ASSERT_TRUE(engine->Submit(first, a.Callback()).ok());
    while (a.num_events() < 2) std::this_thread::sleep_for(std::chrono::microseconds(200));
    engine->Cancel("reused");
    GenerationRequest second = Greedy("Love is", 3);
    second.request_id = "reused";
    Collector b;
    ASSERT_TRUE(engine->Submit(second, b.Callback()).ok());
    EXPECT_EQ(a.Wait().finish_reason, FinishReason::kCancelled);
    const GenerationEvent last = b.Wait();
    EXPECT_NE(last.finish_reason, FinishReason::kCancelled);
    EXPECT_EQ(last.usage.completion_tokens, 3);
  }
}

TEST_F(EngineTest, FullQueueIsResourceExhaustedAtOnce) {
  auto engine = MakeEngine(1, 512, /*max_queue=*/2);
  std::vector<std::unique_ptr<Collector>> cs;
  int exhausted = 0;
  for (int i = 0; i < 8; ++i) {
    cs.push_back(std::make_unique<Collector>());
    absl::Status s = engine->Submit(Greedy("Love is", 200), cs.back()->Callback());
    if (s.code() == absl::StatusCode::kResourceExhausted) ++exhausted;
    else ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_GE(exhausted, 5);
  engine->Shutdown(std::chrono::milliseconds(0));
}

TEST_F(EngineTest, InvalidRequestsNameTheField) {
  auto engine = MakeEngine(1);
  struct Case {
    std::function<void(GenerationRequest&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](GenerationRequest& r) { r.prompt_ids.clear(); }, "prompt"},
      {[](GenerationRequest& r) { r.prompt_ids.push_back(5000); }, "tokens.ids[4] = 5000"},
      {[](GenerationRequest& r) { r.stopping.max_tokens = 0; }, "max_tokens"},
      {[](GenerationRequest& r) { r.stopping.max_tokens = 2000; }, "exceeds the context length"},
      {[](GenerationRequest& r) { r.sampling.temperature = -1; }, "temperature"},
      {[](GenerationRequest& r) { r.sampling.top_p = 1.5; }, "top_p"},
      {[](GenerationRequest& r) { r.sampling.top_k = -1; }, "top_k"},
      {[](GenerationRequest& r) { r.sampling.min_p = 2; }, "min_p"},
      {[](GenerationRequest& r) { r.sampling.num_logprobs = 21; }, "logprobs"},
      {[](GenerationRequest& r) { r.stopping.stop_strings.assign(17, "x"); }, "stop"},
      {[](GenerationRequest& r) { r.stopping.stop_strings = {std::string(257, 'x')}; }, "stop[0]"},
  };
  for (const Case& c : cases) {
    GenerationRequest r = Greedy("Love is", 4);
    c.edit(r);
    const absl::Status s = engine->Submit(r, [](GenerationEvent&&) {});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.message();
  }
  Collector ok;  // and the engine still serves
  ASSERT_TRUE(engine->Submit(Greedy("Love is", 4), ok.Callback()).ok());
  EXPECT_EQ(ok.Wait().usage.completion_tokens, 4);
}

TEST_F(EngineTest, HigherPriorityOvertakesWaitingRequestsOnly) {
  auto engine = MakeEngine(1);
  std::mutex mu;
  std::vector<std::string> order;
  auto record = [&](Collector& c) {
    auto inner = c.Callback();
    return [&, inner](GenerationEvent&& ev) {
      if (ev.finished) {
        std::lock_guard<std::mutex> l(mu);
        order.push_back(ev.request_id);
      }
      inner(std::move(ev));
    };
  };
  Collector a, b, c;
  GenerationRequest ra = Greedy("Love is", 60), rb = Greedy("You will", 4), rc = Greedy("Never", 4);
  ra.request_id = "running";
  rb.request_id = "low";
  rc.request_id = "high";
  rc.priority = 5;
  ASSERT_TRUE(engine->Submit(ra, record(a)).ok());
  while (a.num_events() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(engine->Submit(rb, record(b)).ok());
  ASSERT_TRUE(engine->Submit(rc, record(c)).ok());
  a.Wait();
  b.Wait();
  c.Wait();
  EXPECT_EQ(order, (std::vector<std::string>{"running", "high", "low"}));
}

TEST_F(EngineTest, ShutdownFinishesInFlightThenRejects) {
  auto engine = MakeEngine(2);
  Collector a, b;
  ASSERT_TRUE(engine->Submit(Greedy("Love is", 20), a.Callback()).ok());
  ASSERT_TRUE(engine->Submit(Greedy("You will", 20), b.Callback()).ok());
  std::thread stopper([&] { engine->Shutdown(std::chrono::seconds(60)); });
  EXPECT_EQ(a.Wait().finish_reason, FinishReason::kLength);
  EXPECT_EQ(b.Wait().finish_reason, FinishReason::kLength);
  stopper.join();
  EXPECT_EQ(engine->Submit(Greedy("Love is", 2), [](GenerationEvent&&) {}).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gemma
