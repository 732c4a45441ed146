// Host-side planning of a Forward call: chunks are cut into passes of at most
// `max_tokens` tokens (so the sliding rings and activation buffers bound any
// prompt length), each pass flattened into the int32 metadata block the
// device kernels read. Pure host code.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/backend.h"

namespace gemma::cuda {

// Where each array lives inside the metadata block (offsets in int32s).
struct MetadataLayout {
  int max_tokens = 0;
  int max_seqs = 0;
  int token_ids = 0, positions = 0, token_slot = 0;  // [max_tokens]
  int seq_slot = 0, q_offsets = 0, q_pos0 = 0;       // [max_seqs], [max_seqs + 1], [max_seqs]
  int logit_rows = 0;                                // [max_tokens]
  int total = 0;

  static MetadataLayout For(int max_tokens, int max_seqs);
};

struct PassPlan {
  std::vector<int32_t> token_ids, positions, token_slot;
  std::vector<int32_t> seq_slot, q_offsets{0}, q_pos0;
  std::vector<int32_t> logit_rows;  // token index within the pass, per logits row
  std::vector<int> dest_rows;       // StepOutput row of each logits row
  int max_q_len = 0;

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_seqs() const { return static_cast<int>(seq_slot.size()); }
  bool is_decode() const { return max_q_len == 1; }
  // REQUIRES: the plan fits the layout.
  void WriteTo(const MetadataLayout& layout, int32_t* block) const;
};

// Rows of StepOutput per chunk: one, or size() with all_logits.
std::vector<int> FirstRows(std::span<const SequenceChunk> chunks, int* total_rows);

// Cuts chunks into passes; a pass holds at most one piece of each chunk, so a
// slot's pieces run in order across passes.
std::vector<PassPlan> PlanPasses(std::span<const SequenceChunk> chunks, int max_tokens);

}  // namespace gemma::cuda
