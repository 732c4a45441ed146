// One request's state inside the engine. Owned by the scheduler thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/request.h"
#include "engine/core/stop_checker.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"

namespace gemma {

using Clock = std::chrono::steady_clock;

struct Sequence {
  Sequence(GenerationRequest req, EventCallback cb, const Tokenizer* tokenizer, uint64_t fallback_seed)
      : request(std::move(req)),
        on_event(std::move(cb)),
        sampler(request.sampling, request.prompt_ids, fallback_seed),
        detokenizer(tokenizer),
        stops(request.stopping.stop_strings) {}

  GenerationRequest request;
  EventCallback on_event;
  SequenceSampler sampler;
  IncrementalDetokenizer detokenizer;
  StopChecker stops;

  int slot = -1;                    // backend slot while running
  int64_t arrival = 0;              // admission order (FCFS tie-break)
  int num_prefilled = 0;            // prompt tokens already in the cache
  std::vector<int32_t> output_ids;
  bool cancel_requested = false;

  Clock::time_point submitted_at = Clock::now();
  Clock::time_point scheduled_at{}, first_token_at{};

  int prompt_length() const { return static_cast<int>(request.prompt_ids.size()); }
  bool prefilling() const { return num_prefilled < prompt_length(); }
  // Tokens the slot holds after the current step's work is done.
  int cached_length() const { return num_prefilled + static_cast<int>(output_ids.size()) - (prefilling() ? 0 : 1); }
};

}  // namespace gemma
