#include "server/app/flags.h"

#include <cstdlib>
#include <iostream>

#include "CLI/CLI.hpp"
#include "engine/factory/model_path.h"
#include "server/dtype_flags.h"
#include "server/ops/ops_flags.h"

namespace gemma::server {
namespace {

void AddFlags(CLI::App& app, ServeFlags& f) {
  ServerOptions& s = f.server;
  app.add_option("--model", s.backend.model_dir,
                 "model directory (config.json, safetensors, tokenizer.json or tokenizer.model, "
                 "generation_config.json, chat_template.jinja); default: "
                 "$GEMMA_MODEL_DIR or the embedded demo model")
      ->check(CLI::ExistingDirectory);
  app.add_option("--backend", s.backend.backend, "cpu | cuda | auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  app.add_option("--host", s.host, "address to listen on")->capture_default_str();
  app.add_option("--port", s.port, "port to listen on (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--max-concurrent-sequences", s.backend.max_slots,
                 "sequences decoded together (backend slots)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--max-queue", s.max_queue,
                 "requests waiting for a slot before RESOURCE_EXHAUSTED")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-context", s.backend.max_context, "tokens per sequence (prompt + output)")
      ->check(CLI::Range(2, 1 << 22))
      ->capture_default_str();
  app.add_option("--max-tokens-per-step", s.backend.max_tokens_per_step,
                 "token budget of one engine step (decodes + prefill chunks); 0: as vLLM chooses for "
                 "serving, 8192 on a GPU with >= 70 GiB, 2048 on a smaller one, 512 on the cpu backend")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--kv-block-size", s.backend.kv_block_size,
                 "tokens per KV cache block (a power of two)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            const long n = std::strtol(v.c_str(), nullptr, 10);
            if (n < 1 || n > 1024 || (n & (n - 1)) != 0) return "must be a power of two up to 1024, got " + v;
            return "";
          },
          "POW2"))
      ->capture_default_str();
  app.add_option("--num-kv-blocks", s.backend.num_kv_blocks,
                 "KV blocks in the pool (cuda: the global-layer pool); 0 = sized from memory")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--gpu-memory-utilization", s.backend.gpu_memory_utilization,
                 "cuda: share of the GPU's memory that weights, activations and the KV cache may fill "
                 "(the KV pool gets what is left)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            if (end == v.c_str() || *end != '\0' || !(x > 0.0 && x <= 1.0)) return "must be in (0, 1], got " + v;
            return "";
          },
          "(0,1]"))
      ->capture_default_str();
  app.add_option("--tensor-parallel-size", s.backend.tensor_parallel_size,
                 "ranks of Megatron-style tensor parallelism: 1, 2 or 4 (cuda: one GPU each; cpu: "
                 "the ranks simulated in one process)")
      ->check(CLI::IsMember({1, 2, 4}))
      ->capture_default_str();
  app.add_flag("--random-weights", s.backend.random_weights,
               "cuda: build the model of --model's config.json with deterministic random weights "
               "(benchmarks without a checkpoint; pair with --tokenizer)");
  AddWeightDTypeFlags(app, &s.backend.weights, &s.backend.lm_head);
  AddKvCacheDTypeFlag(app, &s.backend.kv_cache_dtype);
  app.add_option("--tokenizer", s.tokenizer_path,
                 "tokenizer to use instead of the model directory's: a tokenizer.json, a "
                 "tokenizer.model, or a directory holding one")
      ->check(CLI::ExistingPath);
  app.add_option("--chat-template", s.chat_template_path,
                 "Jinja chat template file to use instead of the model's (chat_template.jinja, "
                 "else tokenizer_config.json's chat_template, else the Gemma 4 template)")
      ->check(CLI::ExistingFile);
  app.add_option("--generation-config", s.generation_config,
                 "auto: requests that leave temperature / top_k / top_p / repetition_penalty "
                 "unset take generation_config.json's values; ignore: 1.0 / 0 (off) / 1.0 / 1.0")
      ->check(CLI::IsMember({"auto", "ignore"}))
      ->capture_default_str();
  app.add_option("--http-port", s.http_port,
                 "port of the OpenAI-compatible HTTP API (/v1/chat/completions, ...); -1 = off, "
                 "0 = any free port (logged); the default only warns when busy")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str()
      ->each([&s](const std::string&) { s.http_port_required = true; });
  app.add_option("--served-model-name", s.served_model_name,
                 "model name the HTTP API answers to (default: the model directory's name)");
  app.add_option("--threads", s.backend.num_threads, "cpu backend threads (0 = all cores)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--grace-period-s", f.grace_period_s,
                 "on SIGTERM/SIGINT, how long streams in flight may run before being cancelled")
      ->check(ops::SecondsAtMost(86400.0))
      ->capture_default_str();
  app.add_option("--log-level", f.log_level, "trace | debug | info | warn | error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
}

}  // namespace

std::string DefaultModelDir() { return gemma::DefaultModelDir(); }

ParsedFlags ParseServeFlags(int argc, char** argv) {
  CLI::App app{"gemma-serve: gRPC inference server for Gemma 4"};
  ServeFlags flags;
  flags.server.http_port = 8000;  // vLLM's
  flags.server.http_port_required = false;
  AddFlags(app, flags);
  ops::OpsFlagValues ops_values;
  ops::AddOpsFlags(app, flags.server.ops, ops_values);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // Prints the help text, or the message naming the bad flag.
    const int code = app.exit(error);
    return {std::nullopt, code == 0 ? 0 : 2};
  }
  if (absl::Status s = ops::FinishOpsFlags(ops_values, flags.server.ops); !s.ok()) {
    std::cerr << s.message() << "\n";
    return {std::nullopt, 2};
  }
  if (flags.server.backend.lm_head == WeightDType::kFP8 && flags.server.backend.weights == WeightDType::kBF16) {
    std::cerr << "--lm-head fp8 needs --weights fp8 or int4 (got --weights bf16)\n";
    return {std::nullopt, 2};
  }
  // Without --weights the backend decides from the checkpoint (a W4A16 one
  // runs as int4) and checks --lm-head then.
  if (flags.server.backend.lm_head == WeightDType::kINT4 && flags.server.backend.weights.has_value() &&
      *flags.server.backend.weights != WeightDType::kINT4) {
    std::cerr << "--lm-head int4 needs --weights int4\n";
    return {std::nullopt, 2};
  }
  if (flags.server.backend.model_dir.empty()) flags.server.backend.model_dir = DefaultModelDir();
  if (flags.server.backend.model_dir.empty()) {
    std::cerr << "--model: no model directory given, $GEMMA_MODEL_DIR is unset and the "
                 "embedded demo model was not found next to the executable\n";
    return {std::nullopt, 2};
  }
  return {flags, 0};
}

}  // namespace gemma::server
