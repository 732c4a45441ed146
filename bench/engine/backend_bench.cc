// gemma-backend-bench: forward-pass throughput of any backend through the
// Backend interface (no scheduler, no sampling): prefill tok/s and decode
// tok/s at the given batch sizes. Prints a table and one JSON line.
//
//   gemma-backend-bench [--model DIR] [--backend cpu|cuda] [--batch 1,8]
//                       [--prompt-len 128] [--decode-steps 64]
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "engine/core/slot_tables.h"
#include "engine/factory/backend_factory.h"
#include "engine/factory/model_path.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, backend_name = "cpu";
  std::vector<int> batches = {1, 8};
  int prompt_len = 128, decode_steps = 64, threads = 0;
  CLI::App app{"Backend forward throughput"};
  app.add_option("--model", model, "Model directory (default: the demo model)");
  app.add_option("--backend", backend_name)->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--batch", batches, "Batch sizes")->delimiter(',')->check(CLI::PositiveNumber);
  app.add_option("--prompt-len", prompt_len)->check(CLI::PositiveNumber);
  app.add_option("--decode-steps", decode_steps)->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "CPU threads (0 = all cores)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "gemma-backend-bench: %s\n", e.what());
    return 2;
  }
  int max_batch = 1;
  for (int b : batches) max_batch = std::max(max_batch, b);
  gemma::BackendOptions bo;
  bo.backend = backend_name;
  bo.model_dir = model.empty() ? gemma::DefaultModelDir() : model;
  if (bo.model_dir.empty()) {
    std::fprintf(stderr, "gemma-backend-bench: no --model given and the demo model was not found\n");
    return 2;
  }
  bo.max_slots = max_batch;
  bo.max_context = prompt_len + decode_steps + 1;
  bo.num_threads = threads;
  // A batch's prompts go in one step: the GPU's sliding pool holds them.
  bo.max_tokens_per_step = max_batch * prompt_len;
  auto backend = gemma::CreateBackend(bo);
  if (!backend.ok()) {
    std::fprintf(stderr, "gemma-backend-bench: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  const int vocab = (*backend)->config().vocab_size;
  // Block tables as the engine keeps them, one sequence per slot.
  auto tables = gemma::SlotTables::For(**backend);
  if (!tables.ok()) {
    std::fprintf(stderr, "gemma-backend-bench: %s\n", tables.status().ToString().c_str());
    return 1;
  }
  auto chunk = [&](int slot, std::span<const int32_t> ids, int32_t start) {
    gemma::SequenceChunk c{slot, ids, start, false};
    c.return_logits = true;  // times the forward with its logits copied to the host
    return c;
  };
  std::vector<int32_t> prompt(prompt_len);
  for (int i = 0; i < prompt_len; ++i) prompt[i] = 3 + (i * 7919) % (vocab - 3);
  std::printf("%-6s %14s %14s\n", "batch", "prefill tok/s", "decode tok/s");
  std::string json = "[";
  for (int batch : batches) {
    std::vector<gemma::SequenceChunk> chunks;
    for (int s = 0; s < batch; ++s) {
      tables->Reset(s);
      chunks.push_back(chunk(s, prompt, 0));
    }
    gemma::ForwardResult out;
    auto t0 = std::chrono::steady_clock::now();
    if (auto st = tables->Forward(**backend, chunks, {}, &out); !st.ok()) {
      std::fprintf(stderr, "prefill failed: %s\n", st.ToString().c_str());
      return 1;
    }
    const double prefill = double(batch) * prompt_len / Seconds(t0);
    std::vector<int32_t> next(batch, 5);
    t0 = std::chrono::steady_clock::now();
    for (int step = 0; step < decode_steps; ++step) {
      for (int s = 0; s < batch; ++s) chunks[s] = chunk(s, {&next[s], 1}, prompt_len + step);
      if (auto st = tables->Forward(**backend, chunks, {}, &out); !st.ok()) {
        std::fprintf(stderr, "decode failed: %s\n", st.ToString().c_str());
        return 1;
      }
    }
    const double decode = double(batch) * decode_steps / Seconds(t0);
    std::printf("%-6d %14.1f %14.1f\n", batch, prefill, decode);
    json += (json.size() > 1 ? "," : "") + std::string("{\"batch\":") + std::to_string(batch) +
            ",\"prefill_tok_s\":" + std::to_string(prefill) + ",\"decode_tok_s\":" + std::to_string(decode) + "}";
  }
  std::printf("%s]\n", json.c_str());
  return 0;
}
