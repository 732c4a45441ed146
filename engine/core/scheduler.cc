#include "engine/core/scheduler.h"

#include <algorithm>

namespace gemma {

Scheduler::Scheduler(Backend* backend, int max_tokens_per_step)
    : max_tokens_per_step_(max_tokens_per_step), kv_(MakeKvAllocator(backend)) {}

void Scheduler::Enqueue(std::unique_ptr<Sequence> seq) {
  seq->arrival = arrivals_++;
  auto at = std::find_if(waiting_.begin(), waiting_.end(),
                         [&](const auto& w) { return w->request.priority < seq->request.priority; });
  waiting_.insert(at, std::move(seq));
}

void Scheduler::MarkCancelled(const std::string& request_id) {
  for (auto* list : {&waiting_, &running_})
    for (auto& s : *list)
      if (s->request.request_id == request_id) s->cancel_requested = true;
}

std::vector<Sequence*> Scheduler::Cancelled(bool everything) const {
  std::vector<Sequence*> out;
  for (const auto* list : {&waiting_, &running_})
    for (const auto& s : *list)
      if (everything || s->cancel_requested) out.push_back(s.get());
  return out;
}

void Scheduler::Admit() {
  while (!waiting_.empty()) {
    Sequence& seq = *waiting_.front();
    if (!kv_->Admit(seq)) break;  // nobody overtakes the head
    if (seq.num_cached_tokens < 0) seq.num_cached_tokens = seq.num_computed;
    if (seq.scheduled_at == Clock::time_point{}) seq.scheduled_at = Clock::now();
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  std::vector<Sequence*> order;
  for (auto& s : running_) order.push_back(s.get());
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->arrival < b->arrival; });
  int budget = max_tokens_per_step_;
  for (Sequence* s : order) {
    if (s->decoding() && s->slot >= 0 && ReserveOrPreempt(*s, s->num_computed + 1)) {
      Add(*s, 1, &plan);
      --budget;
    }
  }
  for (Sequence* s : order) {
    if (s->decoding() || budget <= 0 || s->slot < 0) continue;  // slot < 0: preempted this step
    const int n = std::min(budget, s->remaining());
    if (ReserveOrPreempt(*s, s->num_computed + n)) {
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
// arrived after `seq` while blocks are short. False: `seq` waits this step.
bool Scheduler::ReserveOrPreempt(Sequence& seq, int new_length) {
  while (!kv_->Reserve(seq, new_length)) {
    Sequence* victim = nullptr;
    for (auto& r : running_)
      if (r->arrival > seq.arrival && (!victim || r->arrival > victim->arrival)) victim = r.get();
    if (!victim) return false;
    Preempt(*victim);
  }
  return true;
}

// Drops the sequence's KV and puts it back at the head of the queue; it will
// recompute its tokens (reusing cached blocks) and continue where it was.
void Scheduler::Preempt(Sequence& seq) {
  kv_->Release(seq);
  seq.num_computed = 0;
  ++seq.num_preemptions;
  ++preemptions_;
  auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& r) { return r.get() == &seq; });
  waiting_.push_front(std::move(*it));
  running_.erase(it);
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
