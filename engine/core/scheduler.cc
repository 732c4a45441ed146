#include "engine/core/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gemma {
namespace {

// The error of a sequence that does not fit even with the pool to itself.
absl::Status NoRoom(const Sequence& seq, int length, const KvUsage& kv) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "request ", seq.request.request_id, ": the KV cache cannot hold ", length, " tokens even with no other ",
      "sequence running (", kv.free_blocks, " of ", kv.total_blocks, " blocks free; sliding pool ",
      kv.sliding_free_blocks, " of ", kv.sliding_total_blocks, ")"));
}

}  // namespace

Scheduler::Scheduler(Backend* backend, int max_tokens_per_step)
    : max_tokens_per_step_(max_tokens_per_step), kv_(MakeKvAllocator(backend, max_tokens_per_step)) {}

void Scheduler::Enqueue(std::unique_ptr<Sequence> seq) {
  seq->arrival = arrivals_++;
  InsertWaiting(std::move(seq));
}

// Keeps the queue ordered by priority (higher first), then arrival.
void Scheduler::InsertWaiting(std::unique_ptr<Sequence> seq) {
  auto at = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) {
    const int pw = w->request.priority, ps = seq->request.priority;
    return pw < ps || (pw == ps && w->arrival > seq->arrival);
  });
  waiting_.insert(at, std::move(seq));
}

void Scheduler::MarkCancelled(const std::string& request_id, int64_t up_to_submission) {
  for (auto* list : {&waiting_, &running_})
    for (auto& s : *list)
      if (s->request.request_id == request_id && s->submission <= up_to_submission) s->cancel_requested = true;
}

std::vector<Sequence*> Scheduler::Cancelled(bool everything) const {
  std::vector<Sequence*> out;
  for (const auto* list : {&waiting_, &running_})
    for (const auto& s : *list)
      if (everything || s->cancel_requested) out.push_back(s.get());
  return out;
}

std::vector<FailedSequence> Scheduler::Admit() {
  std::vector<FailedSequence> failed;
  while (!waiting_.empty()) {
    Sequence& seq = *waiting_.front();
    if (!kv_->Admit(seq)) {
      // Nobody overtakes the head; running sequences will free what it needs.
      // With none running every block is already free, so it never fits.
      if (running_.empty()) failed.push_back({&seq, NoRoom(seq, static_cast<int>(seq.tokens.size()), kv_->Usage())});
      break;
    }
    if (seq.num_cached_tokens < 0) seq.num_cached_tokens = seq.num_computed;
    if (seq.scheduled_at == Clock::time_point{}) seq.scheduled_at = Clock::now();
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return failed;
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  std::vector<Sequence*> order;
  for (auto& s : running_) order.push_back(s.get());
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->arrival < b->arrival; });
  int budget = max_tokens_per_step_;
  for (Sequence* s : order) {
    if (s->decoding() && s->slot >= 0 && ReserveOrPreempt(*s, s->num_computed + 1, &plan)) {
      Add(*s, 1, &plan);
      --budget;
    }
  }
  for (Sequence* s : order) {
    if (s->decoding() || budget <= 0 || s->slot < 0) continue;  // slot < 0: preempted this step
    const int n = std::min(budget, s->remaining());
    if (ReserveOrPreempt(*s, s->num_computed + n, &plan)) {
      Add(*s, n, &plan);
      budget -= n;
    }
  }
  // A sequence preempted after its chunk was planned must not run.
  for (size_t i = 0; i < plan.owners.size();) {
    if (plan.owners[i]->slot >= 0) {
      ++i;
      continue;
    }
    plan.owners.erase(plan.owners.begin() + i);
    plan.chunks.erase(plan.chunks.begin() + i);
  }
  return plan;
}

void Scheduler::Add(Sequence& s, int n, StepPlan* plan) {
  SequenceChunk c{s.slot, std::span<const int32_t>(s.tokens).subspan(s.num_computed, n), s.num_computed, false};
  kv_->Describe(s, &c);
  plan->chunks.push_back(c);
  plan->owners.push_back(&s);
}

// Gets KV for [0, new_length), preempting the newest running sequences that
// arrived after `seq` while blocks are short (never `seq` itself). False:
// `seq` waits this step for older sequences to free blocks — or, when it runs
// alone, can never get them and goes to plan->failed.
bool Scheduler::ReserveOrPreempt(Sequence& seq, int new_length, StepPlan* plan) {
  while (!kv_->Reserve(seq, new_length)) {
    Sequence* victim = nullptr;
    for (auto& r : running_)
      if (r->arrival > seq.arrival && (!victim || r->arrival > victim->arrival)) victim = r.get();
    if (victim) {
      Preempt(*victim);
      continue;
    }
    if (running_.size() == 1) plan->failed.push_back({&seq, NoRoom(seq, new_length, kv_->Usage())});
    return false;
  }
  return true;
}

// Drops the sequence's KV and puts it back in the queue, ahead of everything
// that arrived after it; it will recompute its tokens (reusing cached blocks)
// and continue where it was.
void Scheduler::Preempt(Sequence& seq) {
  kv_->Release(seq);
  seq.num_computed = 0;
  ++seq.num_preemptions;
  ++preemptions_;
  auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& r) { return r.get() == &seq; });
  std::unique_ptr<Sequence> owned = std::move(*it);
  running_.erase(it);
  InsertWaiting(std::move(owned));
}

void Scheduler::Computed(Sequence& seq, int n) {
  seq.num_computed += n;
  kv_->Commit(seq);
}

void Scheduler::Remove(Sequence& seq) {
  kv_->Release(seq);
  for (auto* list : {&waiting_, &running_}) {
    auto it = std::find_if(list->begin(), list->end(), [&](const auto& s) { return s.get() == &seq; });
    if (it != list->end()) {
      list->erase(it);  // destroys seq
      return;
    }
  }
}

}  // namespace gemma
