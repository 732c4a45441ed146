// Turns OpenAI request bodies (/v1/chat/completions, /v1/completions) into
// gemma.v1.GenerateRequest protos, with vLLM's field semantics. Only the JSON
// shape is checked here (types, which fields go together); ranges and
// meaning are checked once, by BuildGenerationRequest and the engine, whose
// errors api_error.h translates back to these field names.
//
// tool_choice: "none" leaves the tools out of the prompt; "auto" passes them
// all; "required" passes them all and forces the answer to open with a tool
// call; a named function passes only that one and forces the answer to open
// with a call of it (chat.forced_tool_call: the prompt ends with
// `<|tool_call>call:` or `<|tool_call>call:NAME{`, parsed as the output's
// start). What the model generates after that opening is not constrained: a
// call it does not close comes back as content (see gemma.proto).
//
// Thread-safety: free functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gemma/v1/gemma.pb.h"
#include "nlohmann/json.hpp"

namespace gemma::server::http {

enum class Endpoint { kChat, kCompletion };

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;  // as asked; empty: not given
  // One per prompt (a completions request may carry several); each runs n
  // times, choice index = prompt index * n + sample.
  std::vector<v1::GenerateRequest> prompts;
  // echo: each prompt's text (empty for token prompts; the caller decodes).
  std::vector<std::string> prompt_texts;
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions
  bool logprobs = false;       // chat: logprobs; completions: logprobs set
  int top_logprobs = 0;
  bool parallel_tool_calls = true;  // chat: false keeps a turn's first tool call only
};

// INVALID_ARGUMENT naming the OpenAI field when the body's shape is wrong.
absl::StatusOr<OpenAiRequest> ParseChatRequest(const nlohmann::json& body);
absl::StatusOr<OpenAiRequest> ParseCompletionRequest(const nlohmann::json& body);

// /tokenize: {"prompt"} or {"messages", ...}, with add_special_tokens
// (default true: BOS before a prompt).
absl::StatusOr<v1::TokenizeRequest> ParseTokenizeRequest(const nlohmann::json& body);
// /detokenize: {"tokens": [ids]}.
absl::StatusOr<v1::DetokenizeRequest> ParseDetokenizeRequest(const nlohmann::json& body);

}  // namespace gemma::server::http
