#include "engine/cuda/step_plan.h"

#include <algorithm>
#include <cstring>

namespace gemma::cuda {

MetadataLayout MetadataLayout::For(int max_tokens, int max_seqs) {
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
  l.total = at;
  return l;
}

void PassPlan::WriteTo(const MetadataLayout& l, int32_t* block) const {
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

std::vector<PassPlan> PlanPasses(std::span<const SequenceChunk> chunks, int max_tokens) {
  int total_rows = 0;
  const std::vector<int> first = FirstRows(chunks, &total_rows);
  std::vector<int> done(chunks.size(), 0);
  std::vector<PassPlan> passes;
  bool more = true;
  while (more) {
    PassPlan plan;
    int budget = max_tokens;
    for (size_t i = 0; i < chunks.size() && budget > 0; ++i) {
      const SequenceChunk& c = chunks[i];
      const int size = static_cast<int>(c.token_ids.size());
      const int take = std::min(size - done[i], budget);
      if (take <= 0) continue;
      const int begin = plan.num_tokens();
      plan.seq_slot.push_back(c.slot);
      plan.q_pos0.push_back(c.start_position + done[i]);
      for (int j = 0; j < take; ++j) {
        plan.token_ids.push_back(c.token_ids[done[i] + j]);
        plan.positions.push_back(c.start_position + done[i] + j);
        plan.token_slot.push_back(c.slot);
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
    more = false;
    for (size_t i = 0; i < chunks.size(); ++i) more |= done[i] < static_cast<int>(chunks[i].token_ids.size());
    if (plan.num_tokens() > 0) passes.push_back(std::move(plan));
  }
  return passes;
}

}  // namespace gemma::cuda
