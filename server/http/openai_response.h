// OpenAI response bodies and stream chunks from engine events: one Choice
// per engine request gathers what a whole response needs, and renders the
// stream's chunk for each event.
//
// Thread-safety: plain values; one owner at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/request.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/http/openai_request.h"

namespace gemma::server::http {

// What every body and chunk of one response shares.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::kChat;
  std::string id;     // chatcmpl-... / cmpl-...
  int64_t created = 0;  // unix seconds
  std::string model;
  bool logprobs = false;
  const Tokenizer* tokenizer = nullptr;  // token text for logprobs
  // false: a choice returns its first tool call only, the model's later ones
  // dropped (vLLM's reading of OpenAI's parallel_tool_calls).
  bool parallel_tool_calls = true;
};

class Choice {
 public:
  Choice(const ResponseHeader* header, int index, std::string echo)
      : header_(header), index_(index), echo_(std::move(echo)) {}

  // Accumulates the event for the whole response.
  void Add(const GenerationEvent& event);
  // The stream chunk(s) of the event, as SSE "data: ...\n\n" lines; empty
  // when it carries nothing to say. `include_usage`: chunks carry
  // "usage": null, as OpenAI's do when the last one will have it.
  std::string Chunk(const GenerationEvent& event, bool include_usage);
  // This choice in a whole response.
  nlohmann::json ToJson() const;

  bool finished() const { return finished_; }
  const Usage& usage() const { return usage_; }

 private:
  nlohmann::json LogprobsJson(const std::vector<SampleResult>& samples, size_t text_offset) const;
  nlohmann::json StreamChoice(const GenerationEvent& event);
  void AppendLogprobs(const nlohmann::json& delta);

  const ResponseHeader* header_;
  const int index_;
  std::string echo_;  // completions echo: sent before the first text
  bool started_ = false;
  bool finished_ = false;
  std::string text_;
  std::string reasoning_;
  nlohmann::json tool_calls_ = nlohmann::json::array();
  int calls_streamed_ = 0;
  nlohmann::json logprobs_;  // null until a token with logprobs
  std::string finish_reason_;
  nlohmann::json stop_reason_;
  Usage usage_;
};

// "stop" | "length" | "tool_calls" | "abort" (vLLM's names).
const char* OpenAiFinishReason(FinishReason reason);
nlohmann::json UsageJson(int prompt_tokens, int completion_tokens, int cached_tokens);
// "data: <json>\n\n".
std::string SseData(const nlohmann::json& value);
std::string DumpJson(const nlohmann::json& value);
// The chunk-wide fields (id, object, created, model).
nlohmann::json ChunkEnvelope(const ResponseHeader& header);

}  // namespace gemma::server::http
