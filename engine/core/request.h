// What a caller asks of the engine and what it hears back.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/chat/output_parser.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/sampling_params.h"

namespace gemma {

struct StoppingCriteria {
  // Unset: the engine's default, lowered to what the context and the
  // operator's limits leave (ResolveMaxTokens). Set by Submit to the
  // effective value.
  std::optional<int> max_tokens = 16;
  int min_tokens = 0;                     // stops (eos, stop ids, strings) ignored before this
  std::vector<std::string> stop_strings;  // <= 16, each <= 256 bytes
  std::vector<int32_t> stop_token_ids;    // in addition to the model's eos ids
  bool ignore_eos = false;
};

struct GenerationRequest {
  std::string request_id;                 // echoed in every event
  std::vector<int32_t> prompt_ids;        // already tokenized (BOS included if wanted)
  SamplingParams sampling;
  StoppingCriteria stopping;
  int priority = 0;                       // higher is scheduled first; FCFS within one
  bool skip_special_tokens = true;        // leave special tokens out of text deltas
  // Set: the output is split as Gemma 4 writes it (thought channel ->
  // reasoning_delta, tool calls -> tool_calls, the rest -> text_delta). The
  // parser reads the text with special tokens kept, whatever
  // skip_special_tokens says.
  std::optional<OutputParserOptions> output_parsing;
};

// kToolCalls: the model ended its turn (eos or a stop id) after tool calls
// that output parsing recognised.
enum class FinishReason {
  kNone, kEos, kStopToken, kStopString, kLength, kCancelled, kError, kToolCalls
};
const char* FinishReasonName(FinishReason reason);

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
};

struct Timings {
  double queue_ms = 0;             // submit -> first scheduled
  double time_to_first_token_ms = 0;
  double total_ms = 0;
};

// One message on a request's stream. Tokens arrive in order; the last event
// has finished == true (and is the only one that may carry an error).
struct GenerationEvent {
  std::string request_id;
  std::vector<int32_t> token_ids;
  std::string text_delta;
  std::string reasoning_delta;          // output_parsing: thought-channel text
  std::vector<ToolCall> tool_calls;     // output_parsing: calls completed by these tokens
  std::vector<SampleResult> logprobs;   // per token when num_logprobs >= 0
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string matched_stop;             // the stop string, for kStopString
  int32_t matched_stop_token = -1;      // for kEos / kStopToken / kToolCalls
  Usage usage;
  Timings timings;
  absl::Status error;                   // for kError
};

// Called on the engine's event-delivery thread, a request's events in order;
// must not block (hand off to a queue/reactor) nor destroy the engine.
using EventCallback = std::function<void(GenerationEvent&&)>;

}  // namespace gemma
