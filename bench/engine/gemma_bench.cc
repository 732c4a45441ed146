// gemma-bench: decode and prefill throughput of the CUDA backend at batch 1,
// plus the decode GEMV's bandwidth on the model's linear shapes.
//
// One sequence is grown by prefill (real forward passes of the backend's pass
// size, through the paged pools with block tables as the engine keeps them:
// engine/core/slot_tables.h) to each depth in turn; at each depth a run of
// greedy decode steps is timed. Prefill tok/s at depth d = d / (prefill time
// to reach d), decode steps excluded. Results: a table on stdout and JSON
// (--json).
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/engine/batch_decode.h"
#include "bench/engine/gemv_bench.h"
#include "engine/core/slot_tables.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/omitted_launches.h"
#include "server/dtype_flags.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace gemma {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Flags {
  std::string model_dir, config_dir, json_path;
  std::optional<WeightDType> weights;  // unset: the checkpoint's (bf16, or int4 for W4A16)
  std::optional<WeightDType> lm_head;
  KvCacheDType kv_cache_dtype = KvCacheDType::kBF16;
  bool random_weights = false, no_autotune = false, no_graphs = false;
  bool skip_gemv = false;
  bool profile_prefill = false;  // the profiler range covers the first depth's prefill, not decode steps
  std::vector<int> depths = {512, 8192, 32768, 131072};
  std::vector<int> batches;                 // non-empty: the batched paged decode mode
  std::vector<int> contexts = {64, 2048};   // with --batches
  int decode_tokens = 32;
  int chunk_tokens = 0;  // 0: the backend's choice
  cuda::OmittedLaunches omit;  // --omit: timing only
};

struct DepthResult {
  int depth = 0;
  double prefill_tok_s = 0, decode_tok_s = 0, decode_ms = 0;
};

// Deterministic pseudo-random prompt tokens (no ids below 3: pad/eos/bos).
std::vector<int32_t> PromptTokens(int n, int vocab, uint32_t seed) {
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    ids[i] = 3 + static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(vocab - 3));
  }
  return ids;
}

// Slot 0's next `ids`, in forward passes of at most the backend's pass size
// (the sliding pool holds one pass beside the window, as for the engine's
// steps). The backend would cut one long chunk at the same positions.
absl::Status Prefill(CudaBackend& b, SlotTables& tables, std::span<const int32_t> ids, ForwardResult* next) {
  for (size_t at = 0; at < ids.size(); at += b.chunk_tokens()) {
    SequenceChunk c{0, ids.subspan(at, std::min<size_t>(b.chunk_tokens(), ids.size() - at)), tables.length(0),
                    false};
    if (auto st = tables.Forward(b, {&c, 1}, {}, next); !st.ok()) return st;
  }
  return absl::OkStatus();
}

// One greedy decode step of slot 0 after `next`.
absl::Status DecodeStep(CudaBackend& b, SlotTables& tables, ForwardResult* next) {
  int32_t id = next->next_ids[0];
  SequenceChunk c{0, {&id, 1}, tables.length(0), false};
  return tables.Forward(b, {&c, 1}, {}, next);
}

// Prefill chunk sizes of every attention shape bucket, then one full pass
// (its own attention bucket and GEMM shape when the pass size is not a power
// of two), so autotuning happens here and not inside the timed region.
absl::Status WarmUp(CudaBackend& b, SlotTables& tables) {
  ForwardResult next;
  std::vector<int> sizes;
  for (int n = 64; n < b.chunk_tokens(); n *= 2) sizes.push_back(n);
  sizes.push_back(b.chunk_tokens());
  for (int n : sizes) {
    if (tables.length(0) + n >= b.max_context() - 8) break;
    auto ids = PromptTokens(n, b.config().vocab_size, n);
    if (auto st = Prefill(b, tables, ids, &next); !st.ok()) return st;
  }
  for (int s = 0; s < 3; ++s) {
    if (auto st = DecodeStep(b, tables, &next); !st.ok()) return st;
  }
  tables.Reset(0);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DepthResult>> RunDepths(CudaBackend& b, SlotTables& tables, const Flags& f) {
  std::vector<DepthResult> results;
  int pos = 0;
  double prefill_s = 0;
  ForwardResult next;
  next.next_ids = {3};
  for (int depth : f.depths) {
    if (depth <= pos) continue;
    auto ids = PromptTokens(depth - pos, b.config().vocab_size, depth);
    const bool profile_this_prefill = f.profile_prefill && results.empty();
    if (profile_this_prefill) cudaProfilerStart();
    const auto t0 = Clock::now();
    if (auto st = Prefill(b, tables, ids, &next); !st.ok()) return st;
    prefill_s += Seconds(t0, Clock::now());
    if (profile_this_prefill) cudaProfilerStop();
    pos = depth;
    DepthResult r;
    r.depth = depth;
    r.prefill_tok_s = depth / prefill_s;
    Clock::time_point start;
    for (int s = 0; s < f.decode_tokens + 2; ++s) {  // two untimed warm-up steps
      if (s == 2) {
        start = Clock::now();
        // `nsys --capture-range=cudaProfilerApi` sees the timed steps only
        if (!f.profile_prefill) cudaProfilerStart();
      }
      if (auto st = DecodeStep(b, tables, &next); !st.ok()) return st;
      ++pos;
    }
    const double secs = Seconds(start, Clock::now());
    if (!f.profile_prefill) cudaProfilerStop();
    r.decode_tok_s = f.decode_tokens / secs;
    r.decode_ms = 1e3 * secs / f.decode_tokens;
    spdlog::info("bench: depth {}: prefill {:.0f} tok/s, decode {:.2f} tok/s", depth, r.prefill_tok_s,
                 r.decode_tok_s);
    results.push_back(r);
  }
  return results;
}

// What both modes ask of the backend: the model (or its config with random
// weights) and the weights' dtypes.
BackendOptions BaseOptions(const Flags& f) {
  BackendOptions o;
  o.backend = "cuda";
  o.model_dir = f.random_weights ? f.config_dir : f.model_dir;
  o.random_weights = f.random_weights;
  o.weights = f.weights;
  o.lm_head = f.lm_head;
  o.kv_cache_dtype = f.kv_cache_dtype;
  return o;
}

// --batches: B sequences at once through the paged cache (batch_decode.h).
int RunBatches(const Flags& f) {
  BackendOptions o = BaseOptions(f);
  o.max_slots = *std::max_element(f.batches.begin(), f.batches.end());
  o.max_context = *std::max_element(f.contexts.begin(), f.contexts.end()) + f.decode_tokens + 16;
  o.use_cuda_graphs = !f.no_graphs;
  CudaTuning t;
  t.autotune_gemv = !f.no_autotune;
  t.max_chunk_tokens = f.chunk_tokens;
  t.omit = f.omit;
  auto backend = CreateCudaBackendWithTuning(o, t);
  if (!backend.ok()) {
    spdlog::error("{}", backend.status().ToString());
    return 1;
  }
  auto rows = RunBatchDecode(**backend, f.batches, f.contexts, f.decode_tokens);
  if (!rows.ok()) {
    spdlog::error("{}", rows.status().ToString());
    return 1;
  }
  nlohmann::json j;
  j["weights"] = std::string(WeightDTypeName(f.weights.value_or(WeightDType::kBF16)));
  j["omitted_launches"] = cuda::OmittedLaunchesName(f.omit);
  for (const BatchDecodeRow& r : *rows)
    j["batches"].push_back({{"batch", r.batch}, {"context", r.context}, {"step_ms", r.step_ms}, {"tok_s", r.tok_s}});
  if (!f.json_path.empty()) std::ofstream(f.json_path) << j.dump(2) << "\n";
  std::printf("\ngemma-bench --batches (%s weights, paged KV, graphs %s)\n%8s %8s %10s %10s\n",
              std::string(WeightDTypeName(f.weights.value_or(WeightDType::kBF16))).c_str(), f.no_graphs ? "off" : "on",
              "batch", "context",
              "ms/step", "tok/s");
  for (const BatchDecodeRow& r : *rows)
    std::printf("%8d %8d %10.2f %10.0f\n", r.batch, r.context, r.step_ms, r.tok_s);
  if (f.omit.any()) std::printf("omitted launches: %s (timing only)\n", cuda::OmittedLaunchesName(f.omit).c_str());
  return 0;
}

int Run(const Flags& f) {
  if (f.no_autotune) setenv("GEMMA_AUTOTUNE", "0", 1);
  if (!f.batches.empty()) return RunBatches(f);
  BackendOptions o = BaseOptions(f);
  o.max_slots = 1;  // one sequence, through the paged pools
  const int max_depth = *std::max_element(f.depths.begin(), f.depths.end());
  o.max_context = max_depth + static_cast<int>(f.depths.size()) * (f.decode_tokens + 2) + 16;
  o.use_cuda_graphs = !f.no_graphs;
  CudaTuning t;
  t.autotune_gemv = !f.no_autotune;
  t.max_chunk_tokens = f.chunk_tokens;
  t.omit = f.omit;
  const auto t0 = Clock::now();
  auto backend = CreateCudaBackendWithTuning(o, t);
  if (!backend.ok()) {
    spdlog::error("{}", backend.status().ToString());
    return 1;
  }
  CudaBackend& b = **backend;
  if (b.max_context() < o.max_context) {
    spdlog::error("model max context {} < needed {}", b.max_context(), o.max_context);
    return 1;
  }
  const double load_s = Seconds(t0, Clock::now());
  auto tables = SlotTables::For(b);
  if (!tables.ok()) {
    spdlog::error("{}", tables.status().ToString());
    return 1;
  }
  if (auto st = WarmUp(b, *tables); !st.ok()) {
    spdlog::error("warm-up: {}", st.ToString());
    return 1;
  }
  auto results = RunDepths(b, *tables, f);
  if (!results.ok()) {
    spdlog::error("{}", results.status().ToString());
    return 1;
  }
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  const double used_gib = (total_b - free_b) / double(1 << 30);
  std::vector<GemvBenchRow> gemv;
  if (!f.skip_gemv) gemv = RunGemvBench(b.config());

  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  nlohmann::json j;
  j["gpu"] = prop.name;
  j["model"] = o.model_dir;
  j["random_weights"] = f.random_weights;
  j["weights"] = std::string(WeightDTypeName(f.weights.value_or(WeightDType::kBF16)));
  j["graphs"] = !f.no_graphs;
  j["autotune"] = !f.no_autotune;
  j["kv_cache"] = "paged";
  j["weights_gb"] = b.weight_bytes() / 1e9;
  j["kv_cache_gb"] = b.kv_cache_bytes() / 1e9;
  j["gpu_memory_used_gib"] = used_gib;
  j["load_s"] = load_s;
  j["kv_fill"] = "prefill";
  j["chunk_tokens"] = b.chunk_tokens();
  j["omitted_launches"] = cuda::OmittedLaunchesName(f.omit);
  for (const auto& r : *results)
    j["depths"].push_back({{"depth", r.depth}, {"prefill_tok_s", r.prefill_tok_s},
                           {"decode_tok_s", r.decode_tok_s}, {"decode_ms", r.decode_ms}});
  for (const auto& g : gemv)
    j["gemv"].push_back({{"n", g.n}, {"k", g.k}, {"variant", g.variant}, {"us", g.us}, {"tb_s", g.tb_s}});
  if (!f.json_path.empty()) std::ofstream(f.json_path) << j.dump(2) << "\n";

  std::printf("\ngemma-bench on %s (%s, graphs %s, paged KV, autotune %s, chunk %d)\n", prop.name,
              f.random_weights ? "random weights" : "checkpoint", f.no_graphs ? "off" : "on",
              f.no_autotune ? "off" : "on", b.chunk_tokens());
  const std::string dtype(WeightDTypeName(f.weights.value_or(WeightDType::kBF16)));
  std::printf("%s weights %.2f GB, KV cache %.2f GB, GPU memory used %.2f GiB\n", dtype.c_str(),
              b.weight_bytes() / 1e9, b.kv_cache_bytes() / 1e9, used_gib);
  if (f.omit.any()) std::printf("omitted launches: %s (timing only)\n", cuda::OmittedLaunchesName(f.omit).c_str());
  for (const auto& g : gemv)
    std::printf("gemv %6d x %5d  %-6s %8.1f us  %5.2f TB/s\n", g.n, g.k, g.variant.c_str(), g.us, g.tb_s);
  std::printf("%8s %14s %14s %10s\n", "depth", "prefill tok/s", "decode tok/s", "ms/token");
  for (const auto& r : *results)
    std::printf("%8d %14.0f %14.2f %10.2f\n", r.depth, r.prefill_tok_s, r.decode_tok_s, r.decode_ms);
  return 0;
}

}  // namespace
}  // namespace gemma

int main(int argc, char** argv) {
  gemma::Flags f;
  CLI::App app{"gemma-bench: CUDA backend throughput"};
  auto* model = app.add_option("--model", f.model_dir, "model directory (config + safetensors)");
  auto* config = app.add_option("--config", f.config_dir, "directory with config.json (with --random-weights)");
  app.add_flag("--random-weights", f.random_weights, "deterministic random weights at the config's shape");
  gemma::AddWeightDTypeFlags(app, &f.weights, &f.lm_head);
  gemma::AddKvCacheDTypeFlag(app, &f.kv_cache_dtype);
  app.add_flag("--no-autotune", f.no_autotune, "fixed kernel configurations (attention and GEMV)");
  app.add_flag("--no-graphs", f.no_graphs, "decode without CUDA graphs");
  app.add_flag("--skip-gemv", f.skip_gemv, "skip the GEMV bandwidth table");
  app.add_flag("--profile-prefill", f.profile_prefill,
               "profiler range (cudaProfilerStart/Stop) around the first depth's prefill instead of the decode steps");
  app.add_option("--depths", f.depths, "context depths for decode timing")->delimiter(',');
  app.add_option("--decode-tokens", f.decode_tokens, "timed decode steps per depth")->check(CLI::PositiveNumber);
  app.add_option("--json", f.json_path, "write results as JSON here");
  app.add_option("--batches", f.batches, "decode step at these batch sizes (paged KV) instead of the depth sweep")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  app.add_option("--contexts", f.contexts, "with --batches: tokens per sequence before the timed steps")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--chunk", f.chunk_tokens, "tokens per prefill pass (0: the backend's choice)")
      ->check(CLI::Range(0, 16384));
  std::string omit;
  app.add_option("--omit", omit,
                 "timing only, the outputs are wrong: leave these launches out of every pass "
                 "(comma-separated: norms, qkv-rope, attention, linears) to see what they cost in the decode graph");
  model->excludes(config);
  CLI11_PARSE(app, argc, argv);
  if (f.random_weights == f.config_dir.empty() || f.model_dir.empty() == f.config_dir.empty()) {
    std::fprintf(stderr, "use --model DIR, or --config DIR --random-weights\n");
    return 2;
  }
  auto omitted = gemma::cuda::ParseOmittedLaunches(omit);
  if (!omitted.ok()) {
    std::fprintf(stderr, "%s\n", std::string(omitted.status().message()).c_str());
    return 2;
  }
  f.omit = *omitted;
  if (f.omit.any()) {
    spdlog::warn("--omit {}: timing only, every output is wrong", gemma::cuda::OmittedLaunchesName(f.omit));
  }
  std::sort(f.depths.begin(), f.depths.end());
  return gemma::Run(f);
}
