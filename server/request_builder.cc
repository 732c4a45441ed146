#include "server/request_builder.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
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

// Unset fields take the model's defaults; ranges are the engine's to check.
void ConvertSampling(const v1::SamplingParams& in, const GenerationDefaults& defaults,
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
}

// Counts, lengths, vocabulary and the token budget are the engine's to
// check; here only what its types cannot carry (UTF-8, presence).
absl::StatusOr<StoppingCriteria> ConvertStopping(const v1::StoppingCriteria& in) {
  StoppingCriteria out;
  out.max_tokens = in.has_max_tokens() ? std::optional<int>(in.max_tokens()) : std::nullopt;
  out.min_tokens = in.min_tokens();
  for (int i = 0; i < in.stop_size(); ++i) {
    if (absl::Status s = CheckUtf8(in.stop(i), absl::StrCat("stopping.stop[", i, "]")); !s.ok()) {
      return s;
    }
  }
  out.stop_strings.assign(in.stop().begin(), in.stop().end());
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
  absl::StatusOr<std::string> opening = ForcedToolCallOpening(chat, field);
  if (!opening.ok()) return opening.status();
  absl::StatusOr<std::vector<int32_t>> ids = RenderChatIds(
      chat_template != nullptr ? *chat_template : DefaultGemma4ChatTemplate(), tokenizer, *input);
  if (!ids.ok() || opening->empty()) return ids;
  absl::StatusOr<std::vector<int32_t>> forced = tokenizer.Encode(*opening);
  if (!forced.ok()) return forced.status();
  ids->insert(ids->end(), forced->begin(), forced->end());
  return ids;
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
      // The engine checks them against the vocabulary.
      if (request.tokens().ids().empty()) return Invalid("tokens.ids", "must not be empty");
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
  ConvertSampling(request.sampling(), limits.sampling_defaults, &out.sampling);
  if (request.has_logprobs()) {
    // The engine's "none" (-1) is the field's absence, so a set value is
    // a count; the engine checks its upper bound.
    if (request.logprobs() < 0) {
      return Invalid("logprobs", absl::StrCat("must be >= 0 when set, got ", request.logprobs()));
    }
    out.sampling.num_logprobs = request.logprobs();
  }
  absl::StatusOr<PromptTokens> prompt = BuildPrompt(request, tokenizer, limits);
  if (!prompt.ok()) return prompt.status();
  absl::StatusOr<StoppingCriteria> stopping = ConvertStopping(request.stopping());
  if (!stopping.ok()) return stopping.status();
  out.stopping = *std::move(stopping);
  for (int32_t id : prompt->extra_stop_ids) out.stopping.stop_token_ids.push_back(id);
  out.skip_special_tokens = !request.has_skip_special_tokens() || request.skip_special_tokens();
  if (request.has_parse_output() ? request.parse_output() : prompt->is_chat) {
    // Gemma 4's template never opens the thought channel in the prompt (with
    // enable_thinking the model opens it), so parsing starts in content.
    out.output_parsing = OutputParserOptions{};
    if (prompt->is_chat) {
      // Validated while rendering: the forced call's opening is output.
      out.output_parsing->output_prefix = *ForcedToolCallOpening(request.chat(), "chat");
    }
  }
  out.prompt_ids = std::move(prompt->ids);
  return out;
}

}  // namespace gemma::server
