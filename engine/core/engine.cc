#include "engine/core/engine.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "engine/core/event_delivery.h"
#include "engine/core/request_validation.h"
#include "engine/core/scheduler.h"
#include "engine/core/sequence.h"
#include "spdlog/spdlog.h"

namespace gemma {
namespace {

// Sampling the device can do: no penalties (they need the token history) and
// no logprobs (they need the logits on the host).
bool DeviceSamplable(const SamplingParams& p) {
  return p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f &&
         p.num_logprobs < 0;
}

AdmissionLimits AdmissionLimitsOf(const EngineOptions& options, const Backend& backend) {
  AdmissionLimits limits;
  limits.vocab_size = backend.config().vocab_size;
  limits.tokens.max_context = backend.max_context();
  limits.tokens.max_prompt_tokens = options.max_prompt_tokens;
  limits.tokens.max_total_tokens = options.max_total_tokens;
  limits.tokens.default_max_tokens = options.default_max_tokens;
  return limits;
}

double MillisBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class EngineImpl final : public Engine {
 public:
  EngineImpl(const EngineOptions& options, std::unique_ptr<Backend> backend, const Tokenizer* tokenizer)
      : options_(options),
        backend_(std::move(backend)),
        tokenizer_(tokenizer),
        admission_(AdmissionLimitsOf(options, *backend_)),
        scheduler_(backend_.get(), options.max_tokens_per_step),
        rng_(options.seed) {
    const auto& eos = backend_->config().eos_token_ids;
    eos_ids_.insert(eos.begin(), eos.end());
    eos_ids_.insert(tokenizer_->special().eos);
    PublishStats();
    thread_ = std::thread([this] { Loop(); });
  }
  ~EngineImpl() override { Shutdown(std::chrono::milliseconds(0)); }

  absl::Status Submit(GenerationRequest request, EventCallback on_event) override;
  void Cancel(const std::string& request_id) override;
  EngineStats Stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  const Backend& backend() const override { return *backend_; }
  void Shutdown(std::chrono::milliseconds grace) override;

 private:
  void Loop();
  void DrainInbox();
  void ApplyCancels(bool cancel_everything);
  void FinishFailed(std::vector<FailedSequence> failed);
  void RunStep();
  void CommitToken(Sequence& seq, SampleResult sample);
  void Finish(Sequence& seq, FinishReason reason, GenerationEvent event);
  static void EmitText(Sequence& seq, const std::string& text, GenerationEvent& ev);
  static void AppendParsed(ParsedDelta parsed, GenerationEvent& ev);
  void PublishStats();

  // Immutable after construction.
  const EngineOptions options_;
  std::unique_ptr<Backend> backend_;
  const Tokenizer* tokenizer_;
  const AdmissionLimits admission_;
  std::unordered_set<int32_t> eos_ids_;

  // Shared with callers; guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Sequence>> inbox_;
  // Request id -> the submission count when it was cancelled.
  std::unordered_map<std::string, int64_t> cancel_inbox_;
  int64_t submissions_ = 0;
  bool accepting_ = true;
  bool stopping_ = false;
  Clock::time_point stop_deadline_{};
  int num_waiting_shared_ = 0;
  int64_t next_request_number_ = 0;
  EngineStats stats_;

  // Scheduler thread only.
  Scheduler scheduler_;
  int last_batch_size_ = 0;
  std::mt19937_64 rng_;
  int64_t steps_ = 0, prompt_tokens_ = 0, generated_tokens_ = 0;
  double schedule_s_ = 0, forward_s_ = 0, commit_s_ = 0;
  EventDelivery delivery_;  // before thread_: Loop posts to it until joined
  std::thread thread_;
};

absl::Status EngineImpl::Submit(GenerationRequest request, EventCallback on_event) {
  // CheckCapacity reads configuration fixed at construction: safe off the
  // scheduler thread.
  const KvPoolCheck pool = [this](int64_t num_tokens) { return scheduler_.CheckCapacity(num_tokens); };
  if (absl::Status s = ValidateRequest(admission_, pool, &request); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  if (!accepting_) return absl::UnavailableError("the engine is shutting down");
  if (num_waiting_shared_ >= options_.max_queue)
    return absl::ResourceExhaustedError(absl::StrCat("the request queue is full (", options_.max_queue, " waiting)"));
  if (request.request_id.empty()) request.request_id = absl::StrCat("req-", ++next_request_number_);
  auto seq = std::make_unique<Sequence>(std::move(request), std::move(on_event), tokenizer_, rng_());
  seq->submission = ++submissions_;
  inbox_.push_back(std::move(seq));
  stats_.waiting = ++num_waiting_shared_;  // Stats() agrees with the count the next Submit checks
  cv_.notify_one();
  return absl::OkStatus();
}

void EngineImpl::Cancel(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancel_inbox_[request_id] = submissions_;  // not a submission with this id made after now
  cv_.notify_one();
}

void EngineImpl::Shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    accepting_ = false;
    if (!stopping_) {
      stopping_ = true;
      stop_deadline_ = Clock::now() + grace;
    }
    cv_.notify_one();
  }
  // From an event callback: the engine thread ends once that callback returns
  // (it delivers every event before it exits), so joining here would wait on
  // itself; the destructor (or a later call) joins.
  if (delivery_.OnDeliveryThread()) return;
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void EngineImpl::Loop() {
  for (;;) {
    bool past_deadline;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] {
        return !inbox_.empty() || !cancel_inbox_.empty() || stopping_ || scheduler_.has_running() ||
               scheduler_.has_waiting();
      });
      past_deadline = stopping_ && Clock::now() >= stop_deadline_;
    }
    DrainInbox();
    ApplyCancels(past_deadline);
    FinishFailed(scheduler_.Admit());
    PublishStats();  // admitted requests stop counting against the queue at once
    delivery_.Publish();  // cancels and refusals go out before the step runs
    if (scheduler_.has_running()) {
      RunStep();
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ && !scheduler_.has_waiting() && inbox_.empty()) break;
    }
    PublishStats();
    delivery_.Publish();  // after the stats, so a callback sees them
  }
  PublishStats();
  delivery_.Drain();  // Shutdown returns with every event delivered
  if (steps_ > 0) {
    spdlog::info("engine: {} steps, {} prompt and {} generated tokens; step time: schedule {:.2f} s, forward {:.2f} s, "
                 "commit {:.2f} s",
                 steps_, prompt_tokens_, generated_tokens_, schedule_s_, forward_s_, commit_s_);
  }
}

void EngineImpl::DrainInbox() {
  std::vector<std::unique_ptr<Sequence>> incoming;
  std::unordered_map<std::string, int64_t> cancels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(inbox_);
    cancels.swap(cancel_inbox_);
  }
  for (auto& s : incoming) scheduler_.Enqueue(std::move(s));
  for (const auto& [id, up_to] : cancels) scheduler_.MarkCancelled(id, up_to);
}

void EngineImpl::ApplyCancels(bool cancel_everything) {
  for (Sequence* seq : scheduler_.Cancelled(cancel_everything)) Finish(*seq, FinishReason::kCancelled, {});
}

// Sequences the KV cache can never hold end with their error, not a wait.
void EngineImpl::FinishFailed(std::vector<FailedSequence> failed) {
  for (FailedSequence& f : failed) {
    spdlog::error("{}", f.status.ToString());
    GenerationEvent ev;
    ev.error = std::move(f.status);
    Finish(*f.seq, FinishReason::kError, std::move(ev));
  }
}

// One iteration: schedule, forward, then per sequence commit the KV and, when
// its chunk reached the end of its tokens, sample and emit.
void EngineImpl::RunStep() {
  const Clock::time_point t0 = Clock::now();
  StepPlan plan = scheduler_.Schedule();
  FinishFailed(std::move(plan.failed));
  last_batch_size_ = static_cast<int>(plan.chunks.size());
  if (plan.chunks.empty()) {
    // Everyone waits for blocks an older sequence holds; it can always go on
    // (or fails), so this is brief. Don't spin the core meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return;
  }
  // Where each token is picked: by the backend (greedy rows, and every
  // device-samplable row where the backend samples on the device: on the GPU
  // only ids come back), or on the host by the sequence's Sampler from the
  // logits (penalties, logprobs, or a backend that only picks greedily).
  const bool device_draws = backend_->can_sample_on_device();
  std::vector<RowSampling> rows(plan.owners.size());  // greedy unless set
  std::vector<bool> host_drawn(plan.owners.size(), false);
  for (size_t i = 0; i < plan.owners.size(); ++i) {
    const Sequence& seq = *plan.owners[i];
    const bool samples = seq.num_computed + plan.chunks[i].token_ids.size() == seq.tokens.size();
    if (!samples) continue;
    const SamplingParams& sp = seq.request.sampling;
    if (DeviceSamplable(sp) && (device_draws || sp.greedy())) {
      rows[i] = {sp.temperature, sp.top_k, sp.top_p, sp.min_p, seq.sample_seed,
                 static_cast<uint64_t>(seq.num_output())};
    } else {
      host_drawn[i] = true;
      plan.chunks[i].return_logits = true;
    }
  }
  ForwardResult result;
  const Clock::time_point t1 = Clock::now();
  absl::Status status = backend_->Forward(plan.chunks, rows, &result);
  const Clock::time_point t2 = Clock::now();
  schedule_s_ += std::chrono::duration<double>(t1 - t0).count();
  forward_s_ += std::chrono::duration<double>(t2 - t1).count();
  ++steps_;
  if (options_.on_step) options_.on_step(last_batch_size_);
  if (!status.ok()) {
    spdlog::error("forward failed: {}", status.ToString());
    for (Sequence* s : plan.owners) {
      GenerationEvent ev;
      ev.error = status;
      Finish(*s, FinishReason::kError, std::move(ev));
    }
    return;
  }
  const int vocab = backend_->config().vocab_size;
  for (size_t i = 0; i < plan.owners.size(); ++i) {
    Sequence& seq = *plan.owners[i];
    const int n = static_cast<int>(plan.chunks[i].token_ids.size());
    if (n > 1 || seq.num_output() == 0) prompt_tokens_ += n;
    scheduler_.Computed(seq, n);
    if (seq.remaining() > 0) continue;  // more to prefill: these logits are not needed
    SampleResult sample;
    if (host_drawn[i]) {
      sample = seq.sampler.Sample(result.LastLogits(plan.chunks, i, vocab));
    } else {
      // When a neighbour needed the logits, a backend that samples on the
      // device picks this row on the host by the same rule and (seed, step)
      // noise, so the draw does not switch generators with its company (the
      // host twin's exp/log may differ from the device's by an ulp, which
      // decides only near-ties).
      sample.token_id = result.next_ids[i];
      seq.sampler.Accept(sample.token_id);
    }
    CommitToken(seq, std::move(sample));
  }
  commit_s_ += std::chrono::duration<double>(Clock::now() - t2).count();
}

void EngineImpl::CommitToken(Sequence& seq, SampleResult sample) {
  const int32_t id = sample.token_id;
  seq.tokens.push_back(id);
  ++generated_tokens_;
  if (seq.num_output() == 1) seq.first_token_at = Clock::now();
  const StoppingCriteria& stop = seq.request.stopping;
  const int n = seq.num_output();
  const bool can_stop = n >= stop.min_tokens;

  GenerationEvent ev;
  ev.token_ids.push_back(id);
  if (seq.request.sampling.num_logprobs >= 0) ev.logprobs.push_back(std::move(sample));
  FinishReason reason = FinishReason::kNone;
  if (can_stop && !stop.ignore_eos && eos_ids_.count(id)) {
    reason = FinishReason::kEos;
  } else if (can_stop && std::find(stop.stop_token_ids.begin(), stop.stop_token_ids.end(), id) != stop.stop_token_ids.end()) {
    reason = FinishReason::kStopToken;
  }
  if (reason != FinishReason::kNone) {
    ev.matched_stop_token = id;
  } else {
    EmitText(seq, seq.stops.Push(seq.detokenizer.Push(id), can_stop), ev);
    if (seq.stops.matched()) {
      reason = FinishReason::kStopString;
      ev.matched_stop = seq.stops.matched_string();
    } else if (OutputBudgetSpent(n, *stop.max_tokens)) {
      reason = FinishReason::kLength;
    }
  }
  if (reason == FinishReason::kNone) {
    ev.request_id = seq.request.request_id;
    delivery_.Post(seq.on_event, std::move(ev));
    return;
  }
  Finish(seq, reason, std::move(ev));
}

// Adds parsed output to an event.
void EngineImpl::AppendParsed(ParsedDelta parsed, GenerationEvent& ev) {
  ev.text_delta += parsed.content;
  ev.reasoning_delta += parsed.reasoning;
  for (ToolCall& call : parsed.tool_calls) ev.tool_calls.push_back(std::move(call));
}

// Text that is out of the detokenizer and past the stop checks: through the
// output parser when the request has one.
void EngineImpl::EmitText(Sequence& seq, const std::string& text, GenerationEvent& ev) {
  if (!seq.parser.has_value()) {
    ev.text_delta += text;
    return;
  }
  if (!text.empty()) AppendParsed(seq.parser->Push(text), ev);
}

// Emits the final event, frees the slot and forgets the sequence.
void EngineImpl::Finish(Sequence& seq, FinishReason reason, GenerationEvent ev) {
  if (reason != FinishReason::kStopString && reason != FinishReason::kError) {
    std::string tail = seq.stops.Push(seq.detokenizer.Flush(), false);
    tail += seq.stops.Flush();
    EmitText(seq, tail, ev);
  }
  if (seq.parser.has_value() && reason != FinishReason::kError) {
    AppendParsed(seq.parser->Finish(), ev);
    if (seq.parser->saw_tool_calls() &&
        (reason == FinishReason::kEos || reason == FinishReason::kStopToken)) {
      reason = FinishReason::kToolCalls;
    }
  }
  const Clock::time_point now = Clock::now();
  ev.request_id = seq.request.request_id;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.usage.prompt_tokens = seq.prompt_length();
  ev.usage.completion_tokens = seq.num_output();
  ev.usage.cached_tokens = std::max(0, seq.num_cached_tokens);
  const bool started = seq.scheduled_at != Clock::time_point{};
  ev.timings.queue_ms = MillisBetween(seq.submitted_at, started ? seq.scheduled_at : now);
  ev.timings.time_to_first_token_ms =
      seq.num_output() == 0 ? 0 : MillisBetween(seq.submitted_at, seq.first_token_at);
  ev.timings.total_ms = MillisBetween(seq.submitted_at, now);
  delivery_.Post(seq.on_event, std::move(ev));

  scheduler_.Remove(seq);  // destroys seq
}

void EngineImpl::PublishStats() {
  std::lock_guard<std::mutex> lock(mu_);
  num_waiting_shared_ = scheduler_.num_waiting() + static_cast<int>(inbox_.size());
  stats_.running = scheduler_.num_running();
  stats_.waiting = num_waiting_shared_;
  stats_.total_slots = backend_->max_slots();
  stats_.free_slots = stats_.total_slots - stats_.running;
  const KvUsage kv = scheduler_.kv_usage();
  stats_.kv_block_size = kv.block_size;
  stats_.kv_total_blocks = kv.total_blocks;
  stats_.kv_free_blocks = kv.free_blocks;
  stats_.prefix_cache_queries = kv.prefix.queries;
  stats_.prefix_cache_hits = kv.prefix.hits;
  stats_.preemptions = scheduler_.num_preemptions();
  stats_.last_batch_size = last_batch_size_;
  stats_.steps = steps_;
  stats_.prompt_tokens = prompt_tokens_;
  stats_.generated_tokens = generated_tokens_;
  stats_.schedule_seconds = schedule_s_;
  stats_.forward_seconds = forward_s_;
  stats_.commit_seconds = commit_s_;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options,
                                                       std::unique_ptr<Backend> backend,
                                                       const Tokenizer* tokenizer) {
  if (!backend) return absl::InvalidArgumentError("backend is null");
  if (!tokenizer) return absl::InvalidArgumentError("tokenizer is null");
  if (options.max_queue < 1)
    return absl::InvalidArgumentError(absl::StrCat("max_queue must be >= 1, got ", options.max_queue));
  if (options.max_tokens_per_step < 1)
    return absl::InvalidArgumentError(absl::StrCat("max_tokens_per_step must be >= 1, got ", options.max_tokens_per_step));
  if (options.max_prompt_tokens < 0 || options.max_total_tokens < 0 || options.default_max_tokens < 1)
    return absl::InvalidArgumentError(absl::StrCat("max_prompt_tokens (", options.max_prompt_tokens, ") and max_total_tokens (",
                                                   options.max_total_tokens, ") must be >= 0, default_max_tokens (",
                                                   options.default_max_tokens, ") >= 1"));
  // A tokenizer may name more ids than the model embeds (Gemma 3's tokenizer.json
  // has <image_soft_token> at 262144, one past a 262,144-row embedding): those
  // ids are refused in prompts by request validation. The ids the engine
  // itself relies on must be embedded.
  const int model_vocab = backend->config().vocab_size;
  const SpecialTokens& special = tokenizer->special();
  for (auto [name, id] : {std::pair{"bos", special.bos}, std::pair{"eos", special.eos}}) {
    if (id >= model_vocab) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer's ", name, " id ", id,
                                                     " is outside the model's vocabulary of ",
                                                     model_vocab));
    }
  }
  if (tokenizer->vocab_size() > model_vocab) {
    spdlog::warn("tokenizer has {} ids, the model embeds {}: ids {}..{} cannot be used",
                 tokenizer->vocab_size(), model_vocab, model_vocab, tokenizer->vocab_size() - 1);
  }
  return std::unique_ptr<Engine>(new EngineImpl(options, std::move(backend), tokenizer));
}

}  // namespace gemma
