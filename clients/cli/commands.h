// gemma-cli's subcommands. Each returns the process exit code: 0 ok, 1 RPC
// error (message printed to stderr).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "clients/cli/credentials.h"
#include "gemma/v1/gemma.pb.h"

namespace gemma::cli {

struct CommonOptions {
  std::string addr = "127.0.0.1:50051";
  double timeout_s = 600;   // per call
  SecurityOptions security;
};

// The sampling and stopping flags shared by generate and chat.
struct GenerateOptions {
  std::optional<float> temperature, top_p, repetition_penalty;
  std::optional<int> top_k;  // unset: the model's default
  float min_p = 0, presence_penalty = 0, frequency_penalty = 0;
  std::optional<uint64_t> seed;
  std::optional<int> max_tokens, logprobs;
  int min_tokens = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool greedy = false;
  bool print_ids = false;   // print the generated ids after the text
  bool verbose = false;     // print finish reason, usage and timings
  std::string request_id;
};

// Fills sampling, stopping and logprobs of `request` from `options`.
void ApplyGenerateOptions(const GenerateOptions& options, v1::GenerateRequest* request);

int RunGenerate(const CommonOptions& common, const GenerateOptions& options,
                const std::string& prompt, const std::vector<int32_t>& prompt_ids);
struct ChatOptions {
  std::string system_prompt;
  bool think = false;       // enable_thinking: the model writes its thoughts first
  std::string tools_file;   // JSON array of tool declarations (OpenAI's shape)
};

// Reads user turns from `in` until EOF, keeping the conversation. Reasoning
// and tool calls go to stderr, apart from the answer. A line
// "/tool NAME JSON" answers the model's last call to NAME with JSON.
int RunChat(const CommonOptions& common, const GenerateOptions& options,
            const ChatOptions& chat, std::istream& in);
int RunTokenize(const CommonOptions& common, const std::string& text, bool add_bos);
int RunInfo(const CommonOptions& common);
// GetServerStatus: the server's load figures.
int RunStatus(const CommonOptions& common);
// Exit 0 only when the server reports SERVING for `service`.
int RunHealth(const CommonOptions& common, const std::string& service);

}  // namespace gemma::cli
