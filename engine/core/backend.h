// The device-facing interface the engine drives. The CPU backend is the
// reference and test double; the CUDA backend is the product.
//
// A backend owns the KV cache of `max_slots()` sequence slots. The engine
// assigns slots; a slot's cache holds positions [0, length) after the forward
// that wrote them. Thread-safety: called only from the engine's thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/config.h"

namespace gemma {

// One sequence's work in a step: a prefill chunk or a single decode token.
struct SequenceChunk {
  int slot = 0;
  std::span<const int32_t> token_ids;  // positions start_position .. +size-1
  int32_t start_position = 0;          // == tokens already cached in the slot
  bool all_logits = false;             // logits for every token, not only the last
};

struct StepOutput {
  // fp32 logits rows, chunk by chunk: one row per chunk, or size() rows for a
  // chunk with all_logits. Row r is logits[r*vocab, (r+1)*vocab).
  std::vector<float> logits;
  std::vector<int> first_row;  // per chunk, index of its first row
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const ModelConfig& config() const = 0;
  virtual std::string name() const = 0;     // "cpu" | "cuda"
  virtual int max_slots() const = 0;
  virtual int max_context() const = 0;      // tokens one slot can hold
  // Forgets a slot's cache (its next chunk must start at position 0).
  virtual void ResetSlot(int slot) = 0;
  // Runs the forward for every chunk together.
  // REQUIRES: distinct slots; start_position == the slot's cached length.
  virtual absl::Status Forward(std::span<const SequenceChunk> chunks, StepOutput* out) = 0;
};

}  // namespace gemma
