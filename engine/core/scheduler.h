// Iteration-level scheduling: which sequences run in the next forward, with
// how many tokens each, and the KV they need.
//
// Policy: admission in priority order, FCFS among equals (nobody overtakes
// the head of the queue); every decoding sequence gets its token first, then
// prefilling (or recomputing) sequences share the remaining token budget in
// admission order — chunked prefill mixed with decodes. When KV blocks run
// out, the newest running sequences are preempted (their KV dropped, to be
// recomputed later) so that older ones go on: the oldest can always proceed.
//
// Thread-safety: scheduler thread only.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/backend.h"
#include "engine/core/kv_allocator.h"
#include "engine/core/sequence.h"

namespace gemma {

struct StepPlan {
  std::vector<SequenceChunk> chunks;
  std::vector<Sequence*> owners;  // owners[i] runs chunks[i]
};

class Scheduler {
 public:
  Scheduler(Backend* backend, int max_tokens_per_step);

  void Enqueue(std::unique_ptr<Sequence> seq);
  void MarkCancelled(const std::string& request_id);
  // Sequences (waiting or running) to finish as cancelled.
  std::vector<Sequence*> Cancelled(bool everything) const;
  void Admit();
  StepPlan Schedule();
  // The plan's forward wrote `n` more tokens of the sequence.
  void Computed(Sequence& seq, int n);
  // Releases the sequence's KV and forgets it.
  void Remove(Sequence& seq);

  bool has_running() const { return !running_.empty(); }
  bool has_waiting() const { return !waiting_.empty(); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int64_t num_preemptions() const { return preemptions_; }
  KvUsage kv_usage() const { return kv_->Usage(); }

 private:
  bool ReserveOrPreempt(Sequence& seq, int new_length);
  void Preempt(Sequence& seq);
  void Add(Sequence& seq, int n, StepPlan* plan);

  const int max_tokens_per_step_;
  std::unique_ptr<KvAllocator> kv_;
  std::list<std::unique_ptr<Sequence>> waiting_, running_;
  int64_t arrivals_ = 0;
  int64_t preemptions_ = 0;
};

}  // namespace gemma
