#include "server/http/openai_response.h"

#include <utility>

namespace gemma::server::http {
namespace {

using Json = nlohmann::json;

Json ByteList(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

Json ToolCallJson(const ToolCall& call, bool with_index) {
  Json out = {{"id", call.id},
              {"type", "function"},
              {"function", {{"name", call.name}, {"arguments", DumpJson(call.arguments)}}}};
  if (with_index) out["index"] = call.index;
  return out;
}

Json StopReason(const GenerationEvent& event) {
  if (event.finish_reason == FinishReason::kStopString) return event.matched_stop;
  if (event.finish_reason == FinishReason::kStopToken) return event.matched_stop_token;
  return nullptr;
}

}  // namespace

const char* OpenAiFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kToolCalls: return "tool_calls";
    case FinishReason::kCancelled:
    case FinishReason::kError: return "abort";
    default: return "stop";
  }
}

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string SseData(const Json& value) { return "data: " + DumpJson(value) + "\n\n"; }

Json UsageJson(int prompt_tokens, int completion_tokens, int cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

Json ChunkEnvelope(const ResponseHeader& header) {
  const bool chat = header.endpoint == Endpoint::kChat;
  return {{"id", header.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", header.created},
          {"model", header.model}};
}

Json Choice::LogprobsJson(const std::vector<SampleResult>& samples, size_t text_offset) const {
  const Tokenizer& tok = *header_->tokenizer;
  if (header_->endpoint == Endpoint::kChat) {
    Json content = Json::array();
    for (const SampleResult& s : samples) {
      Json top = Json::array();
      for (const TokenLogprob& alt : s.top) {
        const std::string text = tok.TokenBytes(alt.token_id);
        top.push_back({{"token", text}, {"logprob", alt.logprob}, {"bytes", ByteList(text)}});
      }
      const std::string text = tok.TokenBytes(s.token_id);
      content.push_back({{"token", text},
                         {"logprob", s.logprob},
                         {"bytes", ByteList(text)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  Json out = {{"tokens", Json::array()},
              {"token_logprobs", Json::array()},
              {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
  for (const SampleResult& s : samples) {
    const std::string text = tok.TokenBytes(s.token_id);
    Json top = Json::object();
    for (const TokenLogprob& alt : s.top) top[tok.TokenBytes(alt.token_id)] = alt.logprob;
    out["tokens"].push_back(text);
    out["token_logprobs"].push_back(s.logprob);
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(text_offset);
    text_offset += text.size();
  }
  return out;
}

void Choice::AppendLogprobs(const Json& delta) {
  if (logprobs_.is_null()) {
    logprobs_ = delta;
    return;
  }
  for (const auto& [key, values] : delta.items()) {
    for (const Json& v : values) logprobs_[key].push_back(v);
  }
}

void Choice::Add(const GenerationEvent& event) {
  if (!started_) {
    text_ = echo_;
    started_ = true;
  }
  if (header_->logprobs && !event.logprobs.empty()) {
    AppendLogprobs(LogprobsJson(event.logprobs, text_.size()));
  }
  text_ += event.text_delta;
  reasoning_ += event.reasoning_delta;
  for (const ToolCall& call : event.tool_calls) {
    if (header_->parallel_tool_calls || tool_calls_.empty()) tool_calls_.push_back(ToolCallJson(call, false));
  }
  if (!event.finished) return;
  finished_ = true;
  finish_reason_ = OpenAiFinishReason(event.finish_reason);
  stop_reason_ = StopReason(event);
  usage_ = event.usage;
}

Json Choice::StreamChoice(const GenerationEvent& event) {
  Json choice = {{"index", index_}};
  const bool first = !started_;
  started_ = true;
  bool says_something = event.finished;
  if (header_->endpoint == Endpoint::kChat) {
    Json delta = Json::object();
    if (first) {
      delta["role"] = "assistant";
      delta["content"] = "";
      says_something = true;
    }
    if (!event.text_delta.empty()) delta["content"] = event.text_delta;
    if (!event.reasoning_delta.empty()) delta["reasoning_content"] = event.reasoning_delta;
    Json calls = Json::array();
    for (const ToolCall& call : event.tool_calls) {
      if (!header_->parallel_tool_calls && calls_streamed_ > 0) break;
      calls.push_back(ToolCallJson(call, true));
      ++calls_streamed_;
    }
    if (!calls.empty()) delta["tool_calls"] = std::move(calls);
    says_something = says_something || delta.size() > 0;
    choice["delta"] = std::move(delta);
  } else {
    std::string text = first ? echo_ : std::string();
    text += event.text_delta;
    says_something = says_something || !text.empty() || !event.token_ids.empty();
    choice["text"] = std::move(text);
  }
  choice["logprobs"] = header_->logprobs && !event.logprobs.empty()
                           ? LogprobsJson(event.logprobs, text_.size())
                           : Json(nullptr);
  choice["finish_reason"] = event.finished ? Json(OpenAiFinishReason(event.finish_reason)) : Json(nullptr);
  if (event.finished) choice["stop_reason"] = StopReason(event);
  if (!says_something) return nullptr;
  return choice;
}

std::string Choice::Chunk(const GenerationEvent& event, bool include_usage) {
  if (!started_) text_ = echo_;
  Json choice = StreamChoice(event);
  text_ += event.text_delta;  // keeps text offsets right for completions logprobs
  if (event.finished) {
    finished_ = true;
    usage_ = event.usage;
  }
  if (choice.is_null()) return {};
  Json chunk = ChunkEnvelope(*header_);
  chunk["choices"] = Json::array({std::move(choice)});
  if (include_usage) chunk["usage"] = nullptr;
  return SseData(chunk);
}

Json Choice::ToJson() const {
  Json out = {{"index", index_}};
  if (header_->endpoint == Endpoint::kChat) {
    Json message = {{"role", "assistant"},
                    {"content", text_.empty() && !tool_calls_.empty() ? Json(nullptr) : Json(text_)},
                    {"reasoning_content", reasoning_.empty() ? Json(nullptr) : Json(reasoning_)},
                    {"tool_calls", tool_calls_}};
    out["message"] = std::move(message);
  } else {
    out["text"] = text_;
  }
  out["logprobs"] = logprobs_;
  out["finish_reason"] = finish_reason_;
  out["stop_reason"] = stop_reason_;
  return out;
}

}  // namespace gemma::server::http
