// Turns API requests (gemma.v1 protos) into engine requests. Conversion
// only: prompt form, proto field presence, UTF-8, chat roles and templates.
// What the values mean (ranges, vocabulary, the token budget, stop limits)
// the engine checks once at Submit (engine/core/request_validation.h), with
// errors naming the same proto field paths. Errors here are
// INVALID_ARGUMENT naming the proto field and its value, e.g.
// "stopping.stop[0] is not valid UTF-8: '\x80'".
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

struct ServingLimits {
  int max_context = 0;   // prompt + output tokens one sequence may hold
  int vocab_size = 0;    // for the Detokenize RPC's ids (ValidateTokenIds)
  int max_queue = 0;     // requests the engine holds waiting (--max-queue); 0: no limit known
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

// The whole engine request, before the engine's checks. `request_id` is
// already decided by the caller.
absl::StatusOr<GenerationRequest> BuildGenerationRequest(const v1::GenerateRequest& request,
                                                         std::string request_id,
                                                         const Tokenizer& tokenizer,
                                                         const ServingLimits& limits);

// Checks ids against the vocabulary; `field` names them ("ids").
absl::Status ValidateTokenIds(const google::protobuf::RepeatedField<int32_t>& ids,
                              int vocab_size, absl::string_view field);

}  // namespace gemma::server
