#include "clients/loadgen/flags.h"

#include <cmath>
#include <limits>
#include <map>

#include "CLI/CLI.hpp"

namespace gemma::loadgen {
namespace {

void AddConnectionFlags(CLI::App& app, LoadgenOptions& o) {
  app.add_option("--protocol", o.protocol,
                 "grpc (gemma.v1 Generate) or openai (streaming /v1/completions over HTTP)")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, Protocol>{{"grpc", Protocol::kGrpc}, {"openai", Protocol::kOpenAi}}))
      ->capture_default_str();
  app.add_option("--addr", o.addr, "gRPC address host:port (openai: asked for the model's limits)")
      ->capture_default_str();
  app.add_option("--http-addr", o.http_addr, "with --protocol openai: the HTTP API's host:port")
      ->capture_default_str();
  app.add_option("--api-key", o.api_key, "sent as 'authorization: Bearer KEY' metadata");
  app.add_option("--num-channels", o.num_channels, "gRPC channels (connections) to spread over")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--timeout-s", o.timeout_s, "deadline per request")
      ->check(CLI::PositiveNumber)->capture_default_str();
}

void AddLoadFlags(CLI::App& app, LoadgenOptions& o, std::string& rate) {
  CLI::Option* concurrency =
      app.add_option("--concurrency", o.concurrency, "fixed number of streams in flight")
          ->check(CLI::PositiveNumber);
  CLI::Option* request_rate =
      app.add_option("--request-rate", rate,
                     "Poisson arrivals in requests/s; inf = all at once (the default)");
  app.add_option("--max-concurrency", o.max_concurrency,
                 "with --request-rate: cap on streams in flight")
      ->check(CLI::PositiveNumber)->excludes(concurrency);
  concurrency->excludes(request_rate);
  app.add_option("--num-requests", o.num_requests, "measured requests")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--warmup-requests", o.warmup_requests, "requests run first and not counted")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
}

void AddWorkloadFlags(CLI::App& app, LoadgenOptions& o) {
  app.add_option("--input-len", o.input_len, "prompt tokens (random ids, BOS first)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--output-len", o.output_len, "max_tokens per request")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--random-range-ratio", o.random_range_ratio,
                 "lengths uniform in [len*(1-r), len*(1+r)]")
      ->check(CLI::Range(0.0, 0.999))->capture_default_str();
  app.add_option("--prompt", o.prompt, "send this text as every prompt instead of random ids");
  app.add_flag("--ignore-eos", o.ignore_eos, "generate exactly the output length");
  app.add_option("--seed", o.seed, "seeds prompts, lengths, arrivals and sampling")
      ->capture_default_str();
  app.add_option("--temperature", o.temperature, "0 = greedy")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--json", o.json_path, "write the JSON result to this file");
}

// "inf" (any case) or a positive number.
double ParseRate(const std::string& text) {
  if (text.empty()) return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double rate = 0;
  try {
    rate = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(rate > 0)) {
    throw CLI::ValidationError("--request-rate", "expected a positive number or inf, got " + text);
  }
  return rate;
}

}  // namespace

ParsedOptions ParseLoadgenFlags(int argc, char** argv) {
  CLI::App app{"gemma-loadgen: benchmark gemma-serve's Generate stream under load"};
  LoadgenOptions options;
  std::string rate;
  AddConnectionFlags(app, options);
  AddLoadFlags(app, options, rate);
  AddWorkloadFlags(app, options);
  try {
    app.parse(argc, argv);
    options.request_rate = ParseRate(rate);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return {std::nullopt, code == 0 ? 0 : 2};
  }
  return {options, 0};
}

int MaxInFlight(const LoadgenOptions& options) {
  if (options.concurrency) return *options.concurrency;
  return options.max_concurrency.value_or(0);
}

}  // namespace gemma::loadgen
