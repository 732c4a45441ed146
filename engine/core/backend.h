// The device-facing interface the engine drives. The CPU backend is the
// reference and test double; the CUDA backend is the product.
//
// KV cache, two modes:
// - paged (kv_cache_spec().block_size > 0): the engine's KvBlockManager owns
//   the blocks; each chunk carries its block tables (position p of a global
//   layer lives in global_blocks[p / B], of a sliding layer in
//   sliding_blocks[p / B]). Slots then only number the sequences of a step.
// - slots (block_size == 0): the backend keeps `max_slots()` per-sequence
//   caches; a slot's cache holds positions [0, length) after the forward
//   that wrote them.
// Thread-safety: called only from the engine's thread.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/config.h"
#include "engine/sampling/row_sampler.h"

namespace gemma {

// One sequence's work in a step: a prefill chunk or a single decode token.
struct SequenceChunk {
  int slot = 0;
  std::span<const int32_t> token_ids;  // positions start_position .. +size-1
  int32_t start_position = 0;          // == tokens already cached in the slot
  bool all_logits = false;             // logits for every token, not only the last
  // Paged mode only: blocks backing positions [0, start_position + size).
  std::span<const int32_t> global_blocks;
  std::span<const int32_t> sliding_blocks;  // -1 for blocks that left the window
};

struct KvCacheSpec {
  int block_size = 0;          // tokens per block; 0 = slot mode
  int num_global_blocks = 0;
  int num_sliding_blocks = 0;
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
  virtual int max_context() const = 0;      // tokens one sequence can hold
  virtual KvCacheSpec kv_cache_spec() const { return {}; }
  // Device or host bytes the KV cache occupies (reported by GetModelInfo).
  virtual int64_t kv_cache_bytes() const { return 0; }
  // Device memory in use, for metrics; nullopt for a backend without a
  // device. Unlike the rest of the interface, callable from any thread.
  virtual std::optional<size_t> device_memory_used_bytes() const { return std::nullopt; }
  // Forgets a slot's cache (its next chunk must start at position 0).
  virtual void ResetSlot(int slot) = 0;
  // Runs the forward for every chunk together.
  // REQUIRES: distinct slots; start_position == the sequence's cached length.
  virtual absl::Status Forward(std::span<const SequenceChunk> chunks, StepOutput* out) = 0;
  // Greedy fast path: (*next_ids)[i] is the argmax (lowest id on ties) of
  // chunk i's last position. A device backend computes it where the logits
  // are, so no logits cross to the host. The default runs Forward and
  // reduces on the host.
  // Sampling where the logits are: (*next_ids)[i] is drawn from chunk i's
  // last position with rows[i] (row_sampler.h's rule). The engine uses it
  // when can_sample_on_device(); the default runs Forward and draws on the
  // host by the same rule.
  virtual bool can_sample_on_device() const { return false; }
  virtual absl::Status ForwardSample(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                                     std::vector<int32_t>* next_ids) {
    if (rows.size() != chunks.size()) return absl::InvalidArgumentError("ForwardSample: one row per chunk");
    StepOutput out;
    if (absl::Status s = Forward(chunks, &out); !s.ok()) return s;
    next_ids->clear();
    for (size_t i = 0; i < chunks.size(); ++i) next_ids->push_back(SampleRow(LastLogits(chunks, out, i), rows[i]));
    return absl::OkStatus();
  }
  virtual absl::Status ForwardGreedy(std::span<const SequenceChunk> chunks, std::vector<int32_t>* next_ids) {
    StepOutput out;
    if (absl::Status s = Forward(chunks, &out); !s.ok()) return s;
    next_ids->clear();
    for (size_t i = 0; i < chunks.size(); ++i) {
      const std::span<const float> row = LastLogits(chunks, out, i);
      next_ids->push_back(static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    }
    return absl::OkStatus();
  }

 protected:
  // The logits row of chunk i's last position.
  std::span<const float> LastLogits(std::span<const SequenceChunk> chunks, const StepOutput& out, size_t i) const {
    const size_t vocab = static_cast<size_t>(config().vocab_size);
    const size_t row = chunks[i].all_logits ? out.first_row[i] + chunks[i].token_ids.size() - 1 : out.first_row[i];
    return std::span<const float>(out.logits).subspan(row * vocab, vocab);
  }
};

}  // namespace gemma
