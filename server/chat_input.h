// Turns a gemma.v1 Chat into the variables a Hugging Face chat template reads
// (transformers' apply_chat_template shapes: OpenAI-style messages, tools,
// extra keywords), checking every field. Errors are INVALID_ARGUMENT naming
// the proto field path, e.g. "chat.messages[2].content_parts[0].type".
//
// Thread-safety: free functions; safe from any thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/chat/chat_prompt.h"
#include "gemma/v1/gemma.pb.h"

namespace gemma::server {

// `field` prefixes error messages ("chat").
absl::StatusOr<ChatInput> ConvertChat(const v1::Chat& chat, absl::string_view field);

// The opening of the tool call `chat.forced_tool_call` forces, as raw text
// with special tokens spelled out: "<|tool_call>call:" for any function,
// "<|tool_call>call:NAME{" for one; "" when unset. The prompt ends with it
// and the output parser reads it as the output's start (see gemma.proto).
// INVALID_ARGUMENT when tools are missing, the name is not among them, or
// add_generation_prompt is false.
absl::StatusOr<std::string> ForcedToolCallOpening(const v1::Chat& chat, absl::string_view field);

}  // namespace gemma::server
