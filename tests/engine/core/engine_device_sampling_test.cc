// The engine's device-sampling path (Backend::Forward's rows), driven through
// a CPU backend that offers it with the host twin of the kernel's rule:
// seeded draws depend only on (seed, step), so batching and preemption by
// recompute leave outputs unchanged; requests the device cannot sample
// (penalties, logprobs) still sample on the host.
#include <algorithm>
#include <atomic>

#include "engine/core/engine.h"
#include "engine/factory/backend_factory.h"
#include "tests/common/request_runner.h"
#include "gtest/gtest.h"

namespace gemma {
namespace {

const std::string kModel = GEMMA_MODELS_DIR "/gemma4-fortunes";

// A CPU backend that says it samples "on the device" (the CPU backend picks
// every row by the host twin of the kernel's rule). Counts the steps that
// brought logits back for host sampling, and those that drew on the "device".
class SamplingBackend final : public Backend {
 public:
  explicit SamplingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  const ModelConfig& config() const override { return inner_->config(); }
  std::string name() const override { return "cpu-sampling"; }
  int max_slots() const override { return inner_->max_slots(); }
  int max_context() const override { return inner_->max_context(); }
  KvCacheSpec kv_cache_spec() const override { return inner_->kv_cache_spec(); }
  void ResetSlot(int slot) override { inner_->ResetSlot(slot); }
  bool can_sample_on_device() const override { return true; }
  absl::Status Forward(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                       ForwardResult* result) override {
    if (WantsLogits(chunks)) {
      ++forwards_;
    } else if (!std::all_of(rows.begin(), rows.end(), [](const RowSampling& r) { return IsGreedy(r); })) {
      ++samples_;
    }
    return inner_->Forward(chunks, rows, result);
  }
  std::atomic<int> forwards_{0}, samples_{0};

 private:
  std::unique_ptr<Backend> inner_;
};

using Runner = testing::RequestRunner;

class EngineDeviceSampling : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = Tokenizer::Load(kModel + "/tokenizer.model");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
  }
  std::unique_ptr<Engine> MakeEngine(int slots, int num_blocks, SamplingBackend** backend_out) {
    BackendOptions bo;
    bo.backend = "cpu";
    bo.model_dir = kModel;
    bo.max_slots = slots;
    bo.max_context = 256;
    bo.kv_block_size = 8;
    bo.num_kv_blocks = num_blocks;
    auto inner = CreateBackend(bo);
    EXPECT_TRUE(inner.ok()) << inner.status();
    auto backend = std::make_unique<SamplingBackend>(std::move(*inner));
    *backend_out = backend.get();
    EngineOptions eo;
    eo.max_tokens_per_step = 48;
    auto engine = Engine::Create(eo, std::move(backend), tokenizer_.get());
    EXPECT_TRUE(engine.ok()) << engine.status();
    return std::move(*engine);
  }
  GenerationRequest Request(const std::string& prompt, uint64_t seed) {
    GenerationRequest r;
    r.prompt_ids = *tokenizer_->EncodePrompt(prompt);
    r.sampling.temperature = 0.9f;
    r.sampling.top_k = 40;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = seed;
    r.stopping.max_tokens = 60;
    r.stopping.ignore_eos = true;
    return r;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

const char* kPrompts[] = {"The quick brown fox", "Love is", "You will be", "Never trust a",
                          "A fool and his money", "Today is"};

TEST_F(EngineDeviceSampling, SeededDrawsAreUnchangedByBatchingAndPreemption) {
  std::vector<std::vector<int32_t>> alone;
  SamplingBackend* backend = nullptr;
  {
    auto engine = MakeEngine(1, 0, &backend);
    for (size_t i = 0; i < std::size(kPrompts); ++i) {
      Runner r(engine.get());
      r.Submit(Request(kPrompts[i], 100 + i));
      alone.push_back(r.Wait()[0].ids);
    }
    EXPECT_GT(backend->samples_.load(), 0);
    EXPECT_EQ(backend->forwards_.load(), 0);  // no step sampled on the host
  }
  auto engine = MakeEngine(6, 30, &backend);  // 6 x ~9 blocks in 30: preemptions
  Runner r(engine.get());
  for (size_t i = 0; i < std::size(kPrompts); ++i) r.Submit(Request(kPrompts[i], 100 + i));
  const auto got = r.Wait();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].ids, alone[i]) << kPrompts[i];
  EXPECT_GT(engine->Stats().preemptions, 0);
  // Different seeds draw different continuations.
  Runner other(engine.get());
  other.Submit(Request(kPrompts[0], 999));
  EXPECT_NE(other.Wait()[0].ids, alone[0]);
}

TEST_F(EngineDeviceSampling, PenaltiesAndLogprobsStillSampleOnTheHost) {
  SamplingBackend* backend = nullptr;
  auto engine = MakeEngine(2, 0, &backend);
  GenerationRequest penalized = Request("Love is", 5);
  penalized.sampling.repetition_penalty = 1.3f;
  GenerationRequest with_logprobs = Request("Love is", 6);
  with_logprobs.sampling.num_logprobs = 2;
  for (GenerationRequest* req : {&penalized, &with_logprobs}) {
    const int before = backend->forwards_.load();
    Runner r(engine.get());
    r.Submit(*req);
    EXPECT_EQ(r.Wait()[0].ids.size(), 60u);
    EXPECT_GE(backend->forwards_.load() - before, 60);  // every draw on the host
  }
  // A device-samplable neighbour of a host-sampled request draws by the
  // device rule anyway: its tokens don't depend on the company it keeps.
  Runner alone(engine.get());
  alone.Submit(Request("You will be", 11));
  const std::vector<int32_t> want = alone.Wait()[0].ids;
  Runner mixed(engine.get());
  mixed.Submit(Request("You will be", 11));
  mixed.Submit(penalized);
  EXPECT_EQ(mixed.Wait()[0].ids, want);
}

}  // namespace
}  // namespace gemma
