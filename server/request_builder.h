// Turns API requests (gemma.v1 protos) into engine requests, validating every
// field the engine does not see (prompt form, UTF-8, chat roles, limits that
// depend on the served context). Errors are INVALID_ARGUMENT naming the proto
// field and its value, e.g. "sampling.top_p must be in (0, 1], got 1.5".
//
// Thread-safety: free functions over const inputs; safe from any thread.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/chat/chat_template.h"
#include "engine/core/request.h"
#include "engine/model/config.h"
#include "engine/tokenizer/tokenizer.h"
#include "gemma/v1/gemma.pb.h"

namespace gemma::server {

inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxStopStringBytes = 256;
inline constexpr int kMaxLogprobs = 20;
// Output budget when a request leaves stopping.max_tokens unset.
inline constexpr int kDefaultMaxTokens = 1024;

struct ServingLimits {
  int max_context = 0;   // prompt + output tokens one sequence may hold
  int vocab_size = 0;
  // What sampling fields left unset take (the model's generation_config.json,
  // or nothing with --generation-config ignore).
  GenerationDefaults sampling_defaults;
  // The chat template chat prompts are rendered with; null: the built-in
  // Gemma 4 template.
  const ChatTemplate* chat_template = nullptr;
};

bool IsValidUtf8(std::string_view text);

// The prompt's token ids (BOS for text, the template for chat) plus the stop
// ids the prompt form implies (`<turn|>` for chat).
struct PromptTokens {
  std::vector<int32_t> ids;
  std::vector<int32_t> extra_stop_ids;
  bool is_chat = false;
};
absl::StatusOr<PromptTokens> BuildPrompt(const v1::GenerateRequest& request,
                                         const Tokenizer& tokenizer, const ServingLimits& limits);

// Renders a chat with `chat_template` (null: the built-in Gemma 4 one);
// `field` prefixes error messages ("chat").
absl::StatusOr<std::vector<int32_t>> RenderChatMessages(const v1::Chat& chat,
                                                        const Tokenizer& tokenizer,
                                                        const ChatTemplate* chat_template,
                                                        absl::string_view field);

// The whole engine request. `request_id` is already decided by the caller.
absl::StatusOr<GenerationRequest> BuildGenerationRequest(const v1::GenerateRequest& request,
                                                         std::string request_id,
                                                         const Tokenizer& tokenizer,
                                                         const ServingLimits& limits);

// Checks ids against the vocabulary; `field` names them ("ids").
absl::Status ValidateTokenIds(const google::protobuf::RepeatedField<int32_t>& ids,
                              int vocab_size, absl::string_view field);

}  // namespace gemma::server
