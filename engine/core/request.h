// What a caller asks of the engine and what it hears back.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/sampling_params.h"

namespace gemma {

struct StoppingCriteria {
  int max_tokens = 16;                    // >= 1
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
};

enum class FinishReason { kNone, kEos, kStopToken, kStopString, kLength, kCancelled, kError };
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
  std::vector<SampleResult> logprobs;   // per token when num_logprobs >= 0
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string matched_stop;             // the stop string, for kStopString
  int32_t matched_stop_token = -1;      // for kEos / kStopToken
  Usage usage;
  Timings timings;
  absl::Status error;                   // for kError
};

// Called on the engine thread; must not block (hand off to a queue/reactor).
using EventCallback = std::function<void(GenerationEvent&&)>;

}  // namespace gemma
