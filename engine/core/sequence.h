// One request's state inside the engine. Owned by the scheduler thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/request.h"
#include "engine/core/stop_checker.h"
#include "engine/kv/kv_block_manager.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace gemma {

using Clock = std::chrono::steady_clock;

struct Sequence {
  Sequence(GenerationRequest req, EventCallback cb, const Tokenizer* tokenizer, uint64_t fallback_seed)
      : request(std::move(req)),
        on_event(std::make_shared<const EventCallback>(std::move(cb))),
        sampler(request.sampling, request.prompt_ids, fallback_seed),
        sample_seed(request.sampling.seed.value_or(fallback_seed)),
        detokenizer(tokenizer,
                    request.skip_special_tokens && !request.output_parsing.has_value()),
        stops(request.stopping.stop_strings),
        tokens(request.prompt_ids) {
    detokenizer.SetContext(request.prompt_ids);
    if (request.output_parsing.has_value()) parser.emplace(*request.output_parsing);
  }

  GenerationRequest request;
  // The engine's count of submissions when this one was submitted: a cancel
  // reaches only the submissions made before it (a reused request id does
  // not inherit its predecessor's cancel).
  int64_t submission = 0;
  // Shared with the events queued for delivery (EventDelivery), which may
  // outlive the sequence.
  std::shared_ptr<const EventCallback> on_event;
  SequenceSampler sampler;
  uint64_t sample_seed;             // the seed of device-side draws (see RowSampling)
  IncrementalDetokenizer detokenizer;
  StopChecker stops;
  std::optional<OutputParser> parser;  // set when the request asks for output parsing

  // Prompt followed by every generated token. The KV of tokens
  // [0, num_computed) is in the cache; the next forward feeds
  // tokens[num_computed, ...), and the logits after the last token give the
  // next sample. A preempted sequence drops its KV (num_computed = 0) and
  // recomputes, keeping its sampler state, so its output is unchanged.
  std::vector<int32_t> tokens;
  int num_computed = 0;
  int slot = -1;                    // batch slot while running
  BlockTable blocks;                // paged mode
  int64_t arrival = 0;              // admission order (FCFS tie-break, preemption victim)
  int num_cached_tokens = -1;       // prefix-cache hit at first admission; -1 before
  int num_preemptions = 0;
  bool cancel_requested = false;

  Clock::time_point submitted_at = Clock::now();
  Clock::time_point scheduled_at{}, first_token_at{};

  int prompt_length() const { return static_cast<int>(request.prompt_ids.size()); }
  int num_output() const { return static_cast<int>(tokens.size()) - prompt_length(); }
  int remaining() const { return static_cast<int>(tokens.size()) - num_computed; }
  bool decoding() const { return remaining() == 1 && num_output() > 0; }
};

}  // namespace gemma
