// gemma-engine-overhead-bench: the engine's host time per step with a backend
// that costs nothing — scheduling, block tables, stop checks, detokenization
// and events for N concurrent requests — i.e. what a real step pays on top of
// its GPU time while the engine thread prepares and consumes it (the engine
// does not overlap the two). Greedy requests, ignore_eos, device sampling
// (no logits cross to the host), as in the serving benchmarks:
//   gemma-engine-overhead-bench [--model models/gemma4-fortunes] [--concurrency 64]
//                               [--prompt-len 1024] [--output-len 256]
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "engine/core/engine.h"
#include "engine/model/config.h"

namespace gemma {
namespace {

// Returns the next token of every chunk at once: a fixed cycle of ids, so the
// detokenizer has text to produce. Reports a paged KV cache big enough for
// every slot's full context.
class InstantBackend final : public Backend {
 public:
  InstantBackend(ModelConfig config, int slots, int context, std::vector<int32_t> cycle)
      : config_(std::move(config)), slots_(slots), context_(context), cycle_(std::move(cycle)) {}
  const ModelConfig& config() const override { return config_; }
  std::string name() const override { return "instant"; }
  int max_slots() const override { return slots_; }
  int max_context() const override { return context_; }
  KvCacheSpec kv_cache_spec() const override {
    const int blocks = slots_ * ((context_ + 15) / 16) + 64;
    return {16, blocks, blocks};
  }
  void ResetSlot(int) override {}
  bool can_sample_on_device() const override { return true; }
  absl::Status Forward(std::span<const SequenceChunk> chunks, std::span<const RowSampling>,
                       ForwardResult* out) override {
    out->next_ids.resize(chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) {
      const SequenceChunk& c = chunks[i];
      out->next_ids[i] = cycle_[(c.start_position + c.token_ids.size()) % cycle_.size()];
    }
    out->logits.clear();
    out->first_row.clear();
    return absl::OkStatus();
  }

 private:
  ModelConfig config_;
  int slots_, context_;
  std::vector<int32_t> cycle_;
};

int Run(const std::string& model, int concurrency, int prompt_len, int output_len) {
  auto config = LoadModelConfig(model);
  auto tokenizer = Tokenizer::Load(model);
  if (!config.ok() || !tokenizer.ok()) {
    std::fprintf(stderr, "cannot load %s: %s\n", model.c_str(),
                 (!config.ok() ? config.status() : tokenizer.status()).ToString().c_str());
    return 1;
  }
  auto cycle = (*tokenizer)->Encode(" the quick brown fox jumps over the lazy dog, and then it rests a while.");
  if (!cycle.ok() || cycle->empty()) return 1;
  const int context = prompt_len + output_len + 16;
  EngineOptions eo;
  eo.max_queue = concurrency;
  eo.max_tokens_per_step = 2048;
  auto engine = Engine::Create(eo, std::make_unique<InstantBackend>(*config, concurrency, context, *cycle),
                               tokenizer->get());
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> id(10, config->vocab_size - 1);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  int64_t tokens = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  for (int r = 0; r < concurrency; ++r) {
    GenerationRequest req;
    req.request_id = "r" + std::to_string(r);
    req.prompt_ids.resize(prompt_len);
    for (int32_t& t : req.prompt_ids) t = id(rng);
    req.sampling.temperature = 0.0f;
    req.stopping.max_tokens = output_len;
    req.stopping.ignore_eos = true;
    absl::Status s = (*engine)->Submit(std::move(req), [&](const GenerationEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      tokens += static_cast<int64_t>(e.token_ids.size());
      if (e.finished) {
        ++done;
        cv.notify_all();
      }
    });
    if (!s.ok()) {
      std::fprintf(stderr, "submit: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done == concurrency; });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  const EngineStats st = (*engine)->Stats();
  (*engine)->Shutdown(std::chrono::milliseconds(1000));
  std::printf("concurrency %d, prompt %d, output %d: %lld steps, %lld tokens in %.3f s (process CPU %.3f s): "
              "%.1f us host time per step, %.0f output tok/s host ceiling\n",
              concurrency, prompt_len, output_len, static_cast<long long>(st.steps), static_cast<long long>(tokens),
              wall, cpu, 1e6 * wall / std::max<int64_t>(1, st.steps), tokens / wall);
  return 0;
}

}  // namespace
}  // namespace gemma

int main(int argc, char** argv) {
  CLI::App app{"gemma-engine-overhead-bench: the engine's host time per step with an instant backend"};
  std::string model = "models/gemma4-fortunes";
  int concurrency = 64, prompt_len = 1024, output_len = 256;
  app.add_option("--model", model, "model folder (config.json and tokenizer)");
  app.add_option("--concurrency", concurrency, "requests at once")->check(CLI::Range(1, 1024));
  app.add_option("--prompt-len", prompt_len, "prompt tokens per request")->check(CLI::Range(1, 1 << 20));
  app.add_option("--output-len", output_len, "output tokens per request")->check(CLI::Range(1, 1 << 20));
  CLI11_PARSE(app, argc, argv);
  return gemma::Run(model, concurrency, prompt_len, output_len);
}
