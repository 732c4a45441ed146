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
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/config.h"
#include "engine/sampling/row_sampler.h"

namespace gemma {

// One sequence's work in a step: a prefill chunk or a single decode token.
struct SequenceChunk {
  int slot = 0;
  std::span<const int32_t> token_ids;  // positions start_position .. +size-1
  int32_t start_position = 0;          // == tokens already cached in the slot
  bool all_logits = false;             // logits for every token, not only the last (implies return_logits)
  // Paged mode only: blocks backing positions [0, start_position + size).
  std::span<const int32_t> global_blocks;
  std::span<const int32_t> sliding_blocks;  // -1 for blocks that left the window
  // The host needs this chunk's logits (host sampling, logprobs, tests).
  bool return_logits = false;
};

// Whether a Forward of `chunks` returns logits: some chunk asks for them.
inline bool WantsLogits(std::span<const SequenceChunk> chunks) {
  for (const SequenceChunk& c : chunks)
    if (c.return_logits || c.all_logits) return true;
  return false;
}

struct KvCacheSpec {
  int block_size = 0;          // tokens per block; 0 = slot mode
  int num_global_blocks = 0;
  int num_sliding_blocks = 0;
};

// What one Forward returns.
struct ForwardResult {
  // Per chunk: the token its last position picks by its RowSampling.
  std::vector<int32_t> next_ids;
  // Only when WantsLogits(chunks), else empty: fp32 logits rows of every
  // chunk, chunk by chunk: one row per chunk, or size() rows for a chunk with
  // all_logits. Row r is logits[r*vocab, (r+1)*vocab).
  std::vector<float> logits;
  std::vector<int> first_row;  // per chunk, index of its first row (with logits)

  // The logits row of chunk i's last position (REQUIRES: logits returned).
  // Mutable: the host sampler applies penalties in place.
  std::span<float> LastLogits(std::span<const SequenceChunk> chunks, size_t i, int vocab) {
    const size_t row = chunks[i].all_logits ? first_row[i] + chunks[i].token_ids.size() - 1 : first_row[i];
    return std::span<float>(logits).subspan(row * vocab, static_cast<size_t>(vocab));
  }
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
  // Whether the engine takes sampled (not only greedy) tokens from
  // ForwardResult::next_ids: the backend draws where the logits are, by
  // row_sampler.h's rule, so only ids cross to the host. Otherwise the engine
  // asks for the logits of non-greedy rows and draws with its own Sampler.
  virtual bool can_sample_on_device() const { return false; }
  // Runs the forward for every chunk together. result->next_ids[i] is picked
  // from chunk i's last position by rows[i] (row_sampler.h; greedy when
  // IsGreedy(rows[i]): the argmax, lowest id on ties); `rows` empty: greedy
  // for every chunk. The logits come back too when WantsLogits(chunks).
  // REQUIRES: distinct slots; start_position == the sequence's cached length;
  // rows empty or one per chunk.
  virtual absl::Status Forward(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                               ForwardResult* result) = 0;

 protected:
  // The REQUIRES of Forward's rows, as a status naming the counts.
  static absl::Status CheckRows(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows) {
    if (rows.empty() || rows.size() == chunks.size()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(rows.size(), " sampling rows for ", chunks.size(),
                                                   " chunks (want one per chunk, or none for greedy)"));
  }
  // next_ids from result's logits on the host (SampleRow), for a backend
  // whose logits are there (or were copied there).
  void PickOnHost(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                  ForwardResult* result) const {
    result->next_ids.clear();
    for (size_t i = 0; i < chunks.size(); ++i)
      result->next_ids.push_back(
          SampleRow(result->LastLogits(chunks, i, config().vocab_size), rows.empty() ? RowSampling{} : rows[i]));
  }
};

}  // namespace gemma
