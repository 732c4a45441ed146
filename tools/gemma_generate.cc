// gemma-generate: one generation through the engine, from the command line.
//
//   gemma-generate [--model DIR] (--prompt TEXT | --prompt-ids 2,17,9)
//                  [--max-tokens N] [--greedy | sampling flags] [--print-ids]
//                  [--backend cpu|cuda|auto] [--stop-at-eos]
// Like the fixtures' reference (and HF generate with a fixed length), it runs
// exactly --max-tokens steps unless --stop-at-eos is given.
// Bad flags: a message on stderr and exit code 2. Runtime errors: exit code 1.
#include <cstdio>
#include <future>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/core/engine.h"
#include "engine/factory/backend_factory.h"
#include "engine/factory/model_path.h"
#include "server/dtype_flags.h"
#include "spdlog/spdlog.h"

namespace {

struct Flags {
  std::string model;
  std::string prompt;
  std::string prompt_ids;
  int max_tokens = 64;
  bool greedy = false;
  bool print_ids = false;
  bool stats = false;
  bool stop_at_eos = false;
  std::string backend = "auto";
  std::optional<gemma::WeightDType> weights;  // unset: the checkpoint's (bf16, or int4 for W4A16)
  std::optional<gemma::WeightDType> lm_head;
  gemma::KvCacheDType kv_cache_dtype = gemma::KvCacheDType::kBF16;
  int max_context = 4096;
  int tensor_parallel_size = 1;
  gemma::SamplingParams sampling;
  std::optional<uint64_t> seed;
};

int Fail(const std::string& message, int code) {
  std::cerr << "gemma-generate: " << message << "\n";
  return code;
}

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id))
      return absl::InvalidArgumentError("--prompt-ids: '" + std::string(part) + "' is not an integer");
    ids.push_back(id);
  }
  if (ids.empty()) return absl::InvalidArgumentError("--prompt-ids: no ids given");
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"Generate text with Gemma 4 through the gemma-serve engine"};
  app.add_option("--model", f.model, "Model directory (default: the embedded demo model)");
  auto* prompt = app.add_option("--prompt", f.prompt, "Prompt text (BOS is prepended)");
  auto* ids = app.add_option("--prompt-ids", f.prompt_ids, "Comma-separated token ids, used as given");
  prompt->excludes(ids);
  app.add_option("--max-tokens", f.max_tokens, "Tokens to generate")->check(CLI::PositiveNumber);
  app.add_flag("--greedy", f.greedy, "Greedy decoding (temperature 0)");
  app.add_option("--temperature", f.sampling.temperature, "Sampling temperature (0 = greedy)");
  app.add_option("--top-k", f.sampling.top_k, "Keep the k most likely tokens (0 = off)");
  app.add_option("--top-p", f.sampling.top_p, "Nucleus sampling mass in (0, 1]");
  app.add_option("--min-p", f.sampling.min_p, "Drop tokens below min_p * p(best)");
  app.add_option("--repetition-penalty", f.sampling.repetition_penalty, "Repetition penalty (1 = off)");
  app.add_option("--presence-penalty", f.sampling.presence_penalty, "Presence penalty");
  app.add_option("--frequency-penalty", f.sampling.frequency_penalty, "Frequency penalty");
  app.add_option("--seed", f.seed, "RNG seed (same seed and request -> same tokens)");
  app.add_flag("--stop-at-eos", f.stop_at_eos,
               "Stop at the model's EOS; by default exactly --max-tokens steps run, like the fixtures' reference");
  app.add_flag("--print-ids", f.print_ids, "Print only the generated ids, space-separated");
  app.add_flag("--stats", f.stats, "Print prefill/decode speed to stderr");
  app.add_option("--backend", f.backend, "cpu, cuda or auto")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  gemma::AddWeightDTypeFlags(app, &f.weights, &f.lm_head);
  gemma::AddKvCacheDTypeFlag(app, &f.kv_cache_dtype);
  app.add_option("--max-context", f.max_context, "Context length to reserve")->check(CLI::PositiveNumber);
  app.add_option("--tensor-parallel-size", f.tensor_parallel_size,
                 "Tensor-parallel ranks: 1, 2 or 4 (cuda: one GPU each; cpu: simulated in this process)")
      ->check(CLI::IsMember({1, 2, 4}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return Fail(e.what(), 2);
  }
  if (f.prompt.empty() && f.prompt_ids.empty()) return Fail("one of --prompt or --prompt-ids is required", 2);
  if (f.greedy) f.sampling.temperature = 0.0f;
  f.sampling.seed = f.seed;
  if (absl::Status s = gemma::ValidateSamplingParams(f.sampling); !s.ok()) return Fail(std::string(s.message()), 2);
  spdlog::set_level(spdlog::level::warn);

  gemma::BackendOptions bo;
  bo.backend = f.backend;
  bo.model_dir = f.model.empty() ? gemma::DefaultModelDir() : f.model;
  if (bo.model_dir.empty()) return Fail("no --model given and the demo model was not found (set GEMMA_MODEL_DIR)", 2);
  bo.max_slots = 1;
  bo.weights = f.weights;
  bo.lm_head = f.lm_head;
  bo.kv_cache_dtype = f.kv_cache_dtype;
  bo.max_context = f.max_context;
  bo.tensor_parallel_size = f.tensor_parallel_size;
  auto tokenizer = gemma::Tokenizer::Load(bo.model_dir);  // tokenizer.json, else tokenizer.model
  if (!tokenizer.ok()) return Fail(tokenizer.status().ToString(), 1);
  auto backend = gemma::CreateBackend(bo);
  if (!backend.ok()) return Fail(backend.status().ToString(), 1);

  gemma::GenerationRequest request;
  auto prompt_ids = f.prompt_ids.empty() ? (*tokenizer)->EncodePrompt(f.prompt) : ParseIds(f.prompt_ids);
  if (!prompt_ids.ok()) return Fail(std::string(prompt_ids.status().message()), 2);
  request.prompt_ids = *prompt_ids;
  request.sampling = f.sampling;
  request.stopping.max_tokens = f.max_tokens;
  request.stopping.ignore_eos = !f.stop_at_eos;

  gemma::EngineOptions eo;
  auto engine = gemma::Engine::Create(eo, std::move(*backend), tokenizer->get());
  if (!engine.ok()) return Fail(engine.status().ToString(), 1);
  std::promise<gemma::GenerationEvent> done;
  std::vector<int32_t> out_ids;
  absl::Status submitted = (*engine)->Submit(request, [&](gemma::GenerationEvent&& ev) {
    out_ids.insert(out_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
    if (!f.print_ids) {
      std::fwrite(ev.text_delta.data(), 1, ev.text_delta.size(), stdout);
      std::fflush(stdout);
    }
    if (ev.finished) done.set_value(std::move(ev));
  });
  if (!submitted.ok()) return Fail(std::string(submitted.message()), 2);
  gemma::GenerationEvent last = done.get_future().get();
  if (last.finish_reason == gemma::FinishReason::kError) return Fail(last.error.ToString(), 1);
  if (f.print_ids) {
    for (size_t i = 0; i < out_ids.size(); ++i) std::printf(i ? " %d" : "%d", out_ids[i]);
  }
  std::printf("\n");
  if (f.stats) {
    const double decode_ms = last.timings.total_ms - last.timings.time_to_first_token_ms;
    std::fprintf(stderr, "prompt %d tokens, TTFT %.1f ms (%.1f tok/s); %d tokens, decode %.1f tok/s; finish %s\n",
                 last.usage.prompt_tokens, last.timings.time_to_first_token_ms,
                 last.usage.prompt_tokens * 1000.0 / last.timings.time_to_first_token_ms,
                 last.usage.completion_tokens,
                 last.usage.completion_tokens > 1 ? (last.usage.completion_tokens - 1) * 1000.0 / decode_ms : 0.0,
                 gemma::FinishReasonName(last.finish_reason));
  }
  return 0;
}
