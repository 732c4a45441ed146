// Iteration-level scheduling: which sequences run in the next forward, with
// how many tokens each, and the KV they need.
//
// Policy: the queue is ordered by priority, then arrival; admission takes
// its head only (nobody overtakes it, so a long request that waits for blocks
// gets them as running sequences finish, and short newcomers wait behind it).
// A request is admitted when a slot is free and the KV of its known tokens
// is available now (global blocks for all of them, sliding blocks for its
// window plus one chunk). Every decoding sequence gets its token first, then
// prefilling (or recomputing) sequences share the remaining token budget in
// admission order — chunked prefill mixed with decodes. When KV blocks run
// out, the newest running sequences are preempted (their KV dropped, to be
// recomputed later) and go back to the queue by (priority, arrival), ahead
// of everything that arrived after them; a sequence never preempts itself
// or an older one, so the oldest can always proceed. CheckCapacity (at
// submit) keeps out requests the whole pool cannot hold; should one get in
// anyway, it fails with an error rather than waiting forever.
//
// Thread-safety: scheduler thread only, except CheckCapacity (any thread).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/core/backend.h"
#include "engine/core/kv_allocator.h"
#include "engine/core/sequence.h"

namespace gemma {

// A sequence that can never get its KV: to be finished with `status`.
struct FailedSequence {
  Sequence* seq = nullptr;
  absl::Status status;
};

struct StepPlan {
  std::vector<SequenceChunk> chunks;
  std::vector<Sequence*> owners;  // owners[i] runs chunks[i]
  std::vector<FailedSequence> failed;
};

class Scheduler {
 public:
  Scheduler(Backend* backend, int max_tokens_per_step);

  // OK when the KV pool can ever hold a sequence of `num_tokens` tokens
  // (prompt + max_tokens); else INVALID_ARGUMENT naming need and pool.
  absl::Status CheckCapacity(int64_t num_tokens) const { return kv_->CheckCapacity(num_tokens); }
  void Enqueue(std::unique_ptr<Sequence> seq);
  // Marks the sequences of `request_id` submitted up to `up_to_submission`
  // (Sequence::submission) for cancelling.
  void MarkCancelled(const std::string& request_id, int64_t up_to_submission);
  // Sequences (waiting or running) to finish as cancelled.
  std::vector<Sequence*> Cancelled(bool everything) const;
  // Admits from the head of the queue while slots and blocks allow. Returns
  // the head when nothing runs and it still cannot get in: nothing would
  // ever free blocks for it.
  std::vector<FailedSequence> Admit();
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
  bool ReserveOrPreempt(Sequence& seq, int new_length, StepPlan* plan);
  void Preempt(Sequence& seq);
  void InsertWaiting(std::unique_ptr<Sequence> seq);
  void Add(Sequence& seq, int n, StepPlan* plan);

  const int max_tokens_per_step_;
  std::unique_ptr<KvAllocator> kv_;
  std::list<std::unique_ptr<Sequence>> waiting_, running_;
  int64_t arrivals_ = 0;
  int64_t preemptions_ = 0;
};

}  // namespace gemma
