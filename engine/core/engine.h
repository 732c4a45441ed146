// The continuous-batching engine: one scheduler thread owns the backend,
// builds each step from decodes and prefill chunks, samples, detokenizes,
// checks stops and emits events.
//
// Thread-safety: Submit/Cancel/Stats/Shutdown may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/core/request.h"
#include "engine/core/token_budget.h"
#include "engine/tokenizer/tokenizer.h"

namespace gemma {

struct EngineOptions {
  int max_queue = 256;                // waiting requests before RESOURCE_EXHAUSTED
  int max_tokens_per_step = 512;      // prefill chunk budget per step
  uint64_t seed = 0;                  // engine RNG for requests without a seed
  // The operator's per-request token limits (--max-prompt-tokens,
  // --max-total-tokens; 0: only the context bounds them) and the output
  // budget of requests that leave max_tokens unset.
  int max_prompt_tokens = 0;
  int max_total_tokens = 0;
  int default_max_tokens = kDefaultMaxTokens;
  // Optional: called on the engine thread after each forward with the number
  // of sequences in it (metrics). Must not block.
  std::function<void(int batch_size)> on_step;
};

struct EngineStats {
  int running = 0;
  int waiting = 0;
  int free_slots = 0;
  int total_slots = 0;
  int kv_block_size = 0;            // 0: slot mode (blocks below count slots)
  int kv_total_blocks = 0;
  int kv_free_blocks = 0;           // free or cached (reusable) blocks
  int64_t prefix_cache_queries = 0;  // prompt tokens looked up
  int64_t prefix_cache_hits = 0;     // prompt tokens served from the cache
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t prompt_tokens = 0;         // prompt tokens computed (cache hits excluded)
  int64_t generated_tokens = 0;
  int last_batch_size = 0;           // sequences in the last step
  // Wall time of the scheduler thread's steps by phase: choosing the batch,
  // the backend's forward pass (host work and the device's), and committing
  // the tokens (detokenizing, stop checks, queueing the events; their
  // callbacks run on the event-delivery thread).
  double schedule_seconds = 0, forward_seconds = 0, commit_seconds = 0;
};

class Engine {
 public:
  // Starts the scheduler thread. The tokenizer must outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const EngineOptions& options, std::unique_ptr<Backend> backend,
      const Tokenizer* tokenizer);
  virtual ~Engine() = default;

  // Validates and enqueues. INVALID_ARGUMENT for bad fields (named),
  // RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE after Shutdown.
  // `on_event` receives every event of this request, the last with finished.
  virtual absl::Status Submit(GenerationRequest request, EventCallback on_event) = 0;
  // Stops the request within one step; its final event has kCancelled.
  // Unknown ids are ignored.
  virtual void Cancel(const std::string& request_id) = 0;
  virtual EngineStats Stats() const = 0;
  virtual const Backend& backend() const = 0;
  // Rejects new work, finishes (or, past `grace`, cancels) what runs, joins
  // (called from an event callback: returns without joining).
  virtual void Shutdown(std::chrono::milliseconds grace) = 0;
};

}  // namespace gemma
