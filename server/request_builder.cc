#include "server/request_builder.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/sampling/sampling_params.h"
#include "server/chat_input.h"

namespace gemma::server {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", what));
}

// A short, printable rendering of a caller's string for error messages.
std::string Quote(std::string_view text) {
  constexpr size_t kMaxShown = 40;
  const absl::string_view head(text.data(), std::min(text.size(), kMaxShown));
  std::string shown = absl::CHexEscape(head);
  return absl::StrCat("'", shown, text.size() > kMaxShown ? "...'" : "'");
}

absl::Status CheckUtf8(std::string_view text, absl::string_view field) {
  if (IsValidUtf8(text)) return absl::OkStatus();
  return Invalid(field, absl::StrCat("is not valid UTF-8: ", Quote(text)));
}

absl::StatusOr<std::vector<int32_t>> EncodeText(const std::string& text,
                                                const Tokenizer& tokenizer) {
  if (text.empty()) return Invalid("text", "must not be empty");
  if (absl::Status s = CheckUtf8(text, "text"); !s.ok()) return s;
  return tokenizer.EncodePrompt(text);
}

absl::Status ValidateSampling(const v1::SamplingParams& in, const GenerationDefaults& defaults,
                              SamplingParams* out) {
  out->temperature = in.has_temperature() ? in.temperature()
                                          : defaults.temperature.value_or(out->temperature);
  out->top_k = in.has_top_k() ? in.top_k() : defaults.top_k.value_or(out->top_k);
  out->top_p = in.has_top_p() ? in.top_p() : defaults.top_p.value_or(out->top_p);
  out->min_p = in.min_p();
  out->repetition_penalty = in.has_repetition_penalty()
                                ? in.repetition_penalty()
                                : defaults.repetition_penalty.value_or(out->repetition_penalty);
  out->presence_penalty = in.presence_penalty();
  out->frequency_penalty = in.frequency_penalty();
  if (in.has_seed()) out->seed = in.seed();
  // Checked here too so the message carries the proto path, whatever the
  // engine's own validator words it.
  if (!(out->temperature >= 0.0f)) {
    return Invalid("sampling.temperature", absl::StrCat("must be >= 0, got ", out->temperature));
  }
  if (out->top_k < 0) return Invalid("sampling.top_k", absl::StrCat("must be >= 0, got ", out->top_k));
  if (!(out->top_p > 0.0f && out->top_p <= 1.0f)) {
    return Invalid("sampling.top_p", absl::StrCat("must be in (0, 1], got ", out->top_p));
  }
  if (!(out->min_p >= 0.0f && out->min_p <= 1.0f)) {
    return Invalid("sampling.min_p", absl::StrCat("must be in [0, 1], got ", out->min_p));
  }
  absl::Status status = ValidateSamplingParams(*out);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("sampling.", status.message()));
  }
  return absl::OkStatus();
}

absl::Status ValidateStopStrings(const v1::StoppingCriteria& in) {
  if (in.stop_size() > kMaxStopStrings) {
    return Invalid("stopping.stop", absl::StrCat("has ", in.stop_size(), " strings; at most ",
                                                 kMaxStopStrings, " are allowed"));
  }
  for (int i = 0; i < in.stop_size(); ++i) {
    const std::string field = absl::StrCat("stopping.stop[", i, "]");
    const std::string& stop = in.stop(i);
    if (stop.empty()) return Invalid(field, "must not be empty");
    if (stop.size() > static_cast<size_t>(kMaxStopStringBytes)) {
      return Invalid(field, absl::StrCat("is ", stop.size(), " bytes; at most ",
                                         kMaxStopStringBytes, " are allowed"));
    }
    if (absl::Status s = CheckUtf8(stop, field); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Output budget: explicit max_tokens must fit with the prompt; unset takes
// what is left (up to kDefaultMaxTokens).
absl::StatusOr<int> ResolveMaxTokens(const v1::StoppingCriteria& in, int prompt_tokens,
                                     const ServingLimits& limits) {
  const int room = limits.max_context - prompt_tokens;
  if (room < 1) {
    return Invalid("prompt", absl::StrCat("has ", prompt_tokens, " tokens; the context holds ",
                                          limits.max_context, " (prompt + output)"));
  }
  if (!in.has_max_tokens()) return std::min(room, kDefaultMaxTokens);
  const int max_tokens = in.max_tokens();
  if (max_tokens < 1) {
    return Invalid("stopping.max_tokens", absl::StrCat("must be >= 1, got ", max_tokens));
  }
  if (max_tokens > room) {
    return Invalid("stopping.max_tokens",
                   absl::StrCat("= ", max_tokens, " plus the prompt's ", prompt_tokens,
                                " tokens exceeds the context length ", limits.max_context));
  }
  return max_tokens;
}

absl::StatusOr<StoppingCriteria> BuildStopping(const v1::StoppingCriteria& in, int prompt_tokens,
                                               const ServingLimits& limits) {
  StoppingCriteria out;
  absl::StatusOr<int> max_tokens = ResolveMaxTokens(in, prompt_tokens, limits);
  if (!max_tokens.ok()) return max_tokens.status();
  out.max_tokens = *max_tokens;
  if (in.min_tokens() < 0 || in.min_tokens() > out.max_tokens) {
    return Invalid("stopping.min_tokens", absl::StrCat("must be in [0, max_tokens = ",
                                                       out.max_tokens, "], got ", in.min_tokens()));
  }
  out.min_tokens = in.min_tokens();
  if (absl::Status s = ValidateStopStrings(in); !s.ok()) return s;
  out.stop_strings.assign(in.stop().begin(), in.stop().end());
  if (absl::Status s = ValidateTokenIds(in.stop_token_ids(), limits.vocab_size,
                                        "stopping.stop_token_ids");
      !s.ok()) {
    return s;
  }
  out.stop_token_ids.assign(in.stop_token_ids().begin(), in.stop_token_ids().end());
  out.ignore_eos = in.ignore_eos();
  return out;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    int length = 0;
    uint32_t min_code = 0;
    if (lead < 0x80) { ++i; continue; }
    if (lead >= 0xC2 && lead <= 0xDF) { length = 2; min_code = 0x80; }
    else if (lead >= 0xE0 && lead <= 0xEF) { length = 3; min_code = 0x800; }
    else if (lead >= 0xF0 && lead <= 0xF4) { length = 4; min_code = 0x10000; }
    else return false;
    if (i + length > text.size()) return false;
    uint32_t code = lead & (0x7F >> length);
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
    if (code < min_code || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return false;
    i += length;
  }
  return true;
}

absl::Status ValidateTokenIds(const google::protobuf::RepeatedField<int32_t>& ids,
                              int vocab_size, absl::string_view field) {
  for (int i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return Invalid(absl::StrCat(field, "[", i, "]"),
                     absl::StrCat("= ", ids[i], " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> RenderChatMessages(const v1::Chat& chat,
                                                        const Tokenizer& tokenizer,
                                                        const ChatTemplate* chat_template,
                                                        absl::string_view field) {
  absl::StatusOr<ChatInput> input = ConvertChat(chat, field);
  if (!input.ok()) return input.status();
  return RenderChatIds(chat_template != nullptr ? *chat_template : DefaultGemma4ChatTemplate(),
                       tokenizer, *input);
}

absl::StatusOr<PromptTokens> BuildPrompt(const v1::GenerateRequest& request,
                                         const Tokenizer& tokenizer, const ServingLimits& limits) {
  PromptTokens prompt;
  absl::StatusOr<std::vector<int32_t>> ids;
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText:
      ids = EncodeText(request.text(), tokenizer);
      break;
    case v1::GenerateRequest::kTokens:
      if (request.tokens().ids().empty()) return Invalid("tokens.ids", "must not be empty");
      if (absl::Status s = ValidateTokenIds(request.tokens().ids(), limits.vocab_size, "tokens.ids");
          !s.ok()) {
        return s;
      }
      ids = std::vector<int32_t>(request.tokens().ids().begin(), request.tokens().ids().end());
      break;
    case v1::GenerateRequest::kChat:
      ids = RenderChatMessages(request.chat(), tokenizer, limits.chat_template, "chat");
      prompt.is_chat = true;
      // A chat turn ends with <turn|>: the model's answer is complete there.
      if (tokenizer.special().turn_end >= 0) {
        prompt.extra_stop_ids.push_back(tokenizer.special().turn_end);
      }
      break;
    default:
      return Invalid("prompt", "must be set: one of text, tokens or chat");
  }
  if (!ids.ok()) return ids.status();
  prompt.ids = *std::move(ids);
  return prompt;
}

absl::StatusOr<GenerationRequest> BuildGenerationRequest(const v1::GenerateRequest& request,
                                                         std::string request_id,
                                                         const Tokenizer& tokenizer,
                                                         const ServingLimits& limits) {
  GenerationRequest out;
  out.request_id = std::move(request_id);
  out.priority = request.priority();
  if (absl::Status s = ValidateSampling(request.sampling(), limits.sampling_defaults, &out.sampling); !s.ok()) return s;
  if (request.has_logprobs()) {
    if (request.logprobs() < 0 || request.logprobs() > kMaxLogprobs) {
      return Invalid("logprobs", absl::StrCat("must be in [0, ", kMaxLogprobs, "], got ",
                                              request.logprobs()));
    }
    out.sampling.num_logprobs = request.logprobs();
  }
  absl::StatusOr<PromptTokens> prompt = BuildPrompt(request, tokenizer, limits);
  if (!prompt.ok()) return prompt.status();
  absl::StatusOr<StoppingCriteria> stopping =
      BuildStopping(request.stopping(), static_cast<int>(prompt->ids.size()), limits);
  if (!stopping.ok()) return stopping.status();
  out.stopping = *std::move(stopping);
  for (int32_t id : prompt->extra_stop_ids) out.stopping.stop_token_ids.push_back(id);
  out.skip_special_tokens = !request.has_skip_special_tokens() || request.skip_special_tokens();
  if (request.has_parse_output() ? request.parse_output() : prompt->is_chat) {
    // Gemma 4's template never opens the thought channel in the prompt (with
    // enable_thinking the model opens it), so parsing starts in content.
    out.output_parsing = OutputParserOptions{};
  }
  out.prompt_ids = std::move(prompt->ids);
  return out;
}

}  // namespace gemma::server
