// Host-side planning of a Forward call: chunks are cut into passes of at most
// `max_tokens` tokens (so the sliding rings and activation buffers bound any
// prompt length), each pass flattened into the int32 metadata block the
// device kernels read, with each token's cache row and each sequence's
// block tables. Pure host code.
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
  int kv_row_global = 0, kv_row_sliding = 0;         // [max_tokens]
  int global_table_offsets = 0, sliding_table_offsets = 0;  // [max_seqs]
  int tables = 0;  // [max_table_entries]: every global table, then every sliding one; last
  int max_table_entries = 0;
  int total = 0;

  static MetadataLayout For(int max_tokens, int max_seqs, int max_table_entries);
};

struct PassPlan {
  std::vector<int32_t> token_ids, positions, token_slot;
  std::vector<int32_t> seq_slot, q_offsets{0}, q_pos0;
  std::vector<int32_t> logit_rows;  // token index within the pass, per logits row
  std::vector<int> dest_rows;       // result row (logits row or chunk id) of each logits row
  int max_q_len = 0;
  // Cache row of each token (-1: padding, not written) and the sequences'
  // block tables (globals, then slidings; offsets into `tables`).
  std::vector<int32_t> kv_row_global, kv_row_sliding;
  std::vector<int32_t> global_table_offsets, sliding_table_offsets, tables;
  int num_padding = 0;              // trailing padding sequences (PadDecodeTo)

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_seqs() const { return static_cast<int>(seq_slot.size()); }
  int num_real_rows() const { return static_cast<int>(dest_rows.size()); }
  bool is_decode() const { return max_q_len == 1; }
  // Appends empty sequences (no query, no cache write) and padding tokens up
  // to `batch`, so a decode pass can replay the graph of a larger bucket.
  // REQUIRES: is_decode(), batch >= num_seqs().
  void PadDecodeTo(int batch);
  // Returns how many int32s of the block it wrote (a prefix to copy).
  // REQUIRES: the plan fits the layout.
  int WriteTo(const MetadataLayout& layout, int32_t* block) const;
};

// Logits rows of ForwardResult per chunk: one, or size() with all_logits.
std::vector<int> FirstRows(std::span<const SequenceChunk> chunks, int* total_rows);

// Cuts chunks into passes; a pass holds at most one piece of each chunk, so a
// slot's pieces run in order across passes. Chunks carry block tables of
// `block_size` tokens a block (already validated).
std::vector<PassPlan> PlanPasses(std::span<const SequenceChunk> chunks, int max_tokens, int block_size);

}  // namespace gemma::cuda
