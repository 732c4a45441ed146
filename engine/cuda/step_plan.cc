#include "engine/cuda/step_plan.h"

#include <algorithm>
#include <cstring>

namespace gemma::cuda {

MetadataLayout MetadataLayout::For(int max_tokens, int max_seqs, int max_table_entries) {
  MetadataLayout l;
  l.max_tokens = max_tokens;
  l.max_seqs = max_seqs;
  int at = 0;
  auto take = [&](int n) {
    const int begin = at;
    at += (n + 31) / 32 * 32;
    return begin;
  };
  l.token_ids = take(max_tokens);
  l.positions = take(max_tokens);
  l.token_slot = take(max_tokens);
  l.seq_slot = take(max_seqs);
  l.q_offsets = take(max_seqs + 1);
  l.q_pos0 = take(max_seqs);
  l.logit_rows = take(max_tokens);
  l.max_table_entries = max_table_entries;
  l.kv_row_global = take(max_tokens);
  l.kv_row_sliding = take(max_tokens);
  l.global_table_offsets = take(max_seqs);
  l.sliding_table_offsets = take(max_seqs);
  l.tables = take(max_table_entries);
  l.total = at;
  return l;
}

void PassPlan::PadDecodeTo(int batch) {
  const int real_tokens = num_tokens();
  for (int i = num_seqs(); i < batch; ++i) {
    seq_slot.push_back(0);
    q_pos0.push_back(0);
    q_offsets.push_back(real_tokens);  // empty: no query, no attention work
    global_table_offsets.push_back(0);
    sliding_table_offsets.push_back(0);
    token_ids.push_back(0);
    positions.push_back(0);
    token_slot.push_back(0);
    kv_row_global.push_back(-1);
    kv_row_sliding.push_back(-1);
    logit_rows.push_back(num_tokens() - 1);
    ++num_padding;
  }
}

int PassPlan::WriteTo(const MetadataLayout& l, int32_t* block) const {
  auto put = [&](int offset, const std::vector<int32_t>& v) {
    if (!v.empty()) std::memcpy(block + offset, v.data(), v.size() * sizeof(int32_t));
  };
  put(l.token_ids, token_ids);
  put(l.positions, positions);
  put(l.token_slot, token_slot);
  put(l.seq_slot, seq_slot);
  put(l.q_offsets, q_offsets);
  put(l.q_pos0, q_pos0);
  put(l.logit_rows, logit_rows);
  put(l.kv_row_global, kv_row_global);
  put(l.kv_row_sliding, kv_row_sliding);
  put(l.global_table_offsets, global_table_offsets);
  put(l.sliding_table_offsets, sliding_table_offsets);
  put(l.tables, tables);
  return l.tables + static_cast<int>(tables.size());
}

std::vector<int> FirstRows(std::span<const SequenceChunk> chunks, int* total_rows) {
  std::vector<int> first;
  int rows = 0;
  for (const SequenceChunk& c : chunks) {
    first.push_back(rows);
    rows += c.all_logits ? static_cast<int>(c.token_ids.size()) : 1;
  }
  *total_rows = rows;
  return first;
}

namespace {

// Cache row of `position` through a block table (-1 when the table has no
// block there).
int32_t RowOf(std::span<const int32_t> table, int position, int block_size) {
  const size_t b = static_cast<size_t>(position / block_size);
  if (b >= table.size() || table[b] < 0) return -1;
  return table[b] * block_size + position % block_size;
}

// Appends the first `n` entries of a table (0 past its end: a model without
// that kind of layer has empty tables).
void AppendTable(std::span<const int32_t> table, int n, std::vector<int32_t>* out) {
  for (int i = 0; i < n; ++i) out->push_back(i < static_cast<int>(table.size()) ? table[i] : 0);
}

}  // namespace

std::vector<PassPlan> PlanPasses(std::span<const SequenceChunk> chunks, int max_tokens, int block_size) {
  int total_rows = 0;
  const std::vector<int> first = FirstRows(chunks, &total_rows);
  std::vector<int> done(chunks.size(), 0);
  std::vector<PassPlan> passes;
  bool more = true;
  while (more) {
    PassPlan plan;
    std::vector<int32_t> sliding_tables;  // appended after the global ones
    int budget = max_tokens;
    for (size_t i = 0; i < chunks.size() && budget > 0; ++i) {
      const SequenceChunk& c = chunks[i];
      const int size = static_cast<int>(c.token_ids.size());
      const int take = std::min(size - done[i], budget);
      if (take <= 0) continue;
      const int begin = plan.num_tokens();
      plan.seq_slot.push_back(c.slot);
      plan.q_pos0.push_back(c.start_position + done[i]);
      const int entries = (c.start_position + done[i] + take + block_size - 1) / block_size;
      plan.global_table_offsets.push_back(static_cast<int32_t>(plan.tables.size()));
      AppendTable(c.global_blocks, entries, &plan.tables);
      plan.sliding_table_offsets.push_back(static_cast<int32_t>(sliding_tables.size()));
      AppendTable(c.sliding_blocks, entries, &sliding_tables);
      for (int j = 0; j < take; ++j) {
        const int pos = c.start_position + done[i] + j;
        plan.token_ids.push_back(c.token_ids[done[i] + j]);
        plan.positions.push_back(pos);
        plan.token_slot.push_back(c.slot);
        plan.kv_row_global.push_back(RowOf(c.global_blocks, pos, block_size));
        plan.kv_row_sliding.push_back(RowOf(c.sliding_blocks, pos, block_size));
        if (c.all_logits) {
          plan.logit_rows.push_back(begin + j);
          plan.dest_rows.push_back(first[i] + done[i] + j);
        }
      }
      done[i] += take;
      if (!c.all_logits && done[i] == size) {
        plan.logit_rows.push_back(begin + take - 1);
        plan.dest_rows.push_back(first[i]);
      }
      plan.q_offsets.push_back(plan.num_tokens());
      plan.max_q_len = std::max(plan.max_q_len, take);
      budget -= take;
    }
    for (int32_t& offset : plan.sliding_table_offsets) offset += static_cast<int32_t>(plan.tables.size());
    plan.tables.insert(plan.tables.end(), sliding_tables.begin(), sliding_tables.end());
    more = false;
    for (size_t i = 0; i < chunks.size(); ++i) more |= done[i] < static_cast<int>(chunks[i].token_ids.size());
    if (plan.num_tokens() > 0) passes.push_back(std::move(plan));
  }
  return passes;
}

}  // namespace gemma::cuda
