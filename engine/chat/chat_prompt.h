// A chat as a chat template sees it, and its rendering into prompt ids: the
// one path that Generate, Tokenize and gemma-tokenize share.
//
// Thread-safety: free functions over const inputs; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "engine/chat/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace gemma {

// transformers' apply_chat_template arguments: OpenAI-style messages, tool
// declarations (null: none) and extra template variables.
struct ChatInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;
};

// The template's text, with the tokenizer's bos / eos pieces as bos_token /
// eos_token. INVALID_ARGUMENT carrying the template's message when it raises.
absl::StatusOr<std::string> RenderChatText(const ChatTemplate& chat_template,
                                           const Tokenizer& tokenizer, const ChatInput& chat);

// RenderChatText encoded as transformers does (no special tokens added: the
// template writes <bos> itself).
absl::StatusOr<std::vector<int32_t>> RenderChatIds(const ChatTemplate& chat_template,
                                                   const Tokenizer& tokenizer,
                                                   const ChatInput& chat);

// Whether the chat asks the model to think (template_kwargs.enable_thinking
// is true), which decides how output parsing starts.
bool ChatEnablesThinking(const ChatInput& chat);

// The Gemma 4 chat template shipped with the -it checkpoints, built into the
// binary: what a model directory without a template of its own gets.
const ChatTemplate& DefaultGemma4ChatTemplate();

// The template a server (or gemma-tokenize) renders with: `template_file`
// when given, else the model directory's (LoadFromModelDir), else the
// built-in Gemma 4 one. Errors: an unreadable or unsupported template.
absl::StatusOr<ChatTemplate> LoadServingChatTemplate(const std::string& template_file,
                                                     const std::string& model_dir);

}  // namespace gemma
