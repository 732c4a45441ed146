// gemma-cli: a terminal client for gemma-serve.
//   gemma-cli generate "The quick brown fox" --max-tokens 40 --greedy
//   gemma-cli chat                     (reads turns from stdin)
//   gemma-cli tokenize "hello" | info | status | health
//   gemma-cli --api-key KEY --tls-ca ca.pem [--tls-cert c.pem --tls-key k.pem] ...
// Exit codes: 0 ok, 1 RPC error (message printed), 2 bad flags.
#include <iostream>

#include "CLI/CLI.hpp"
#include "clients/cli/commands.h"

namespace {

using gemma::cli::GenerateOptions;

void AddGenerateFlags(CLI::App* command, GenerateOptions& o) {
  command->add_option("--temperature", o.temperature, "unset: 1.0; 0 = greedy");
  command->add_flag("--greedy", o.greedy, "temperature 0");
  command->add_option("--top-k", o.top_k, "0 = off");
  command->add_option("--top-p", o.top_p, "(0, 1]");
  command->add_option("--min-p", o.min_p, "[0, 1]");
  command->add_option("--repetition-penalty", o.repetition_penalty, "1 = off");
  command->add_option("--presence-penalty", o.presence_penalty);
  command->add_option("--frequency-penalty", o.frequency_penalty);
  command->add_option("--seed", o.seed);
  command->add_option("--max-tokens", o.max_tokens);
  command->add_option("--min-tokens", o.min_tokens);
  command->add_option("--stop", o.stop, "stop string (repeatable)");
  command->add_option("--stop-token-id", o.stop_token_ids, "stop token id (repeatable)");
  command->add_flag("--ignore-eos", o.ignore_eos);
  command->add_option("--logprobs", o.logprobs, "top alternatives per token (0..20)");
  command->add_option("--request-id", o.request_id);
  command->add_flag("--print-ids", o.print_ids, "print the generated token ids");
  command->add_flag("-v,--verbose", o.verbose, "print finish reason, usage and timings");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gemma-cli: talk to gemma-serve"};
  app.require_subcommand(1);
  gemma::cli::CommonOptions common;
  app.add_option("--addr", common.addr, "server address host:port")->capture_default_str();
  app.add_option("--timeout-s", common.timeout_s, "deadline per call")
      ->check(CLI::PositiveNumber)->capture_default_str();
  gemma::cli::SecurityOptions& security = common.security;
  app.add_option("--api-key", security.api_key, "sent as 'authorization: Bearer KEY'");
  app.add_flag("--tls", security.tls, "TLS with the system's roots");
  app.add_option("--tls-ca", security.tls_ca_file, "CA (PEM) to verify the server; implies --tls");
  app.add_option("--tls-cert", security.tls_cert_file, "client certificate (PEM), mutual TLS");
  app.add_option("--tls-key", security.tls_key_file, "client private key (PEM)");

  GenerateOptions options;
  std::string prompt, service;
  gemma::cli::ChatOptions chat_options;
  std::vector<int32_t> prompt_ids;
  bool add_bos = false;
  CLI::App* generate = app.add_subcommand("generate", "stream a completion of a prompt");
  generate->add_option("prompt", prompt, "prompt text (BOS is prepended)");
  generate->add_option("--ids", prompt_ids, "prompt as token ids instead of text");
  AddGenerateFlags(generate, options);
  CLI::App* chat = app.add_subcommand("chat", "interactive chat: one user turn per stdin line");
  chat->add_option("--system", chat_options.system_prompt, "system prompt");
  chat->add_flag("--think", chat_options.think,
                 "enable_thinking: the model thinks first (printed to stderr as [thinking])");
  chat->add_option("--tools", chat_options.tools_file,
                   "JSON file: an array of tool declarations ({\"type\": \"function\", "
                   "\"function\": {name, description, parameters}}); answer calls with "
                   "\"/tool NAME JSON\"")
      ->check(CLI::ExistingFile);
  AddGenerateFlags(chat, options);
  CLI::App* tokenize = app.add_subcommand("tokenize", "print the token ids of a text");
  tokenize->add_option("text", prompt)->required();
  tokenize->add_flag("--add-bos", add_bos);
  CLI::App* info = app.add_subcommand("info", "print the served model's description");
  CLI::App* status = app.add_subcommand("status", "the server's load (GetServerStatus)");
  CLI::App* health = app.add_subcommand("health", "grpc.health.v1 Check; exit 0 when SERVING");
  health->add_option("--service", service, "service name ('' = the whole server)");

  try {
    app.parse(argc, argv);
    if (generate->parsed() && prompt.empty() && prompt_ids.empty()) {
      throw CLI::ValidationError("generate", "a prompt or --ids is required");
    }
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : 2;
  }
  if (std::string error; !gemma::cli::LoadSecurityFiles(&security, &error)) {
    std::cerr << error << "\n";
    return 2;
  }
  if (generate->parsed()) return gemma::cli::RunGenerate(common, options, prompt, prompt_ids);
  if (chat->parsed()) return gemma::cli::RunChat(common, options, chat_options, std::cin);
  if (tokenize->parsed()) return gemma::cli::RunTokenize(common, prompt, add_bos);
  if (info->parsed()) return gemma::cli::RunInfo(common);
  if (status->parsed()) return gemma::cli::RunStatus(common);
  if (health->parsed()) return gemma::cli::RunHealth(common, service);
  return 2;
}
