#include "server/ops/server_metrics.h"

#include "absl/status/status.h"

namespace gemma::server::ops {
namespace {

using Type = MetricsRegistry::Type;

// Latency buckets from 1 ms to ~8 min, doubling: the fortunes model on a CPU
// and a 31B model on a busy GPU both land inside.
std::vector<double> LatencyBuckets() { return ExponentialBuckets(0.001, 2.0, 20); }
std::vector<double> TokenCountBuckets() { return ExponentialBuckets(1.0, 2.0, 18); }

void AddFamilies(MetricsRegistry& r) {
  r.AddFamily("gemma_num_requests_running", Type::kGauge, "Requests holding a batch slot.");
  r.AddFamily("gemma_num_requests_waiting", Type::kGauge, "Requests queued for a slot.");
  r.AddFamily("gemma_kv_cache_usage_perc", Type::kGauge,
              "Fraction of KV blocks in use (1 = full); slots in slot mode.");
  r.AddFamily("gemma_kv_cache_used_blocks", Type::kGauge, "KV blocks in use.");
  r.AddFamily("gemma_kv_cache_free_blocks", Type::kGauge, "KV blocks free or cached (reusable).");
  r.AddFamily("gemma_kv_cache_block_size_tokens", Type::kGauge,
              "Tokens per KV block (0: slot mode).");
  r.AddFamily("gemma_prefix_cache_queries_total", Type::kCounter,
              "Prompt tokens looked up in the prefix cache.");
  r.AddFamily("gemma_prefix_cache_hits_total", Type::kCounter,
              "Prompt tokens served from the prefix cache.");
  r.AddFamily("gemma_prefix_cache_hit_rate", Type::kGauge,
              "Prefix-cache hits / queries over the server's life (0 before any query).");
  r.AddFamily("gemma_prompt_tokens_total", Type::kCounter,
              "Prompt tokens computed (prefix-cache hits excluded, recomputation included).");
  r.AddFamily("gemma_generation_tokens_total", Type::kCounter, "Tokens generated.");
  r.AddFamily("gemma_num_preemptions_total", Type::kCounter,
              "Sequences preempted (KV freed, recomputed later).");
  r.AddFamily("gemma_engine_steps_total", Type::kCounter, "Engine steps (forward passes).");
  r.AddFamily("gemma_engine_step_seconds_total", Type::kCounter,
              "Scheduler-thread time in engine steps by phase: schedule, forward (host and device), commit "
              "(detokenize, stop checks, streaming).",
              {"phase"});
  r.AddFamily("gemma_request_success_total", Type::kCounter,
              "Requests finished by the engine, by reason (stop | length | abort).",
              {"finished_reason"});
  r.AddFamily("gemma_request_failure_total", Type::kCounter,
              "Generate calls that ended with an error status, by gRPC code.", {"code"});
  r.AddFamily("gemma_time_to_first_token_seconds", Type::kHistogram, "Submit to first token.", {},
              LatencyBuckets());
  r.AddFamily("gemma_inter_token_latency_seconds", Type::kHistogram,
              "Time between consecutive output tokens.", {}, LatencyBuckets());
  r.AddFamily("gemma_e2e_request_latency_seconds", Type::kHistogram, "Submit to last token.", {},
              LatencyBuckets());
  r.AddFamily("gemma_request_queue_time_seconds", Type::kHistogram, "Submit to first scheduled.",
              {}, LatencyBuckets());
  r.AddFamily("gemma_request_prompt_tokens", Type::kHistogram,
              "Prompt length of finished requests.", {}, TokenCountBuckets());
  r.AddFamily("gemma_request_generation_tokens", Type::kHistogram,
              "Output length of finished requests.", {}, TokenCountBuckets());
  r.AddFamily("gemma_batch_size", Type::kHistogram, "Sequences per engine step.", {},
              ExponentialBuckets(1.0, 2.0, 13));
  r.AddFamily("gemma_gpu_memory_used_bytes", Type::kGauge,
              "Device memory in use (CUDA backend only).");
}

}  // namespace

const char* FinishedReasonLabel(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEos:
    case FinishReason::kStopToken:
    case FinishReason::kStopString:
      return "stop";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "abort";
    case FinishReason::kNone:
    case FinishReason::kError:
      break;
  }
  return "";
}

ServerMetrics::ServerMetrics() {
  AddFamilies(registry_);
  // Present from the first scrape, so rate() has a zero to start from.
  for (const char* reason : {"stop", "length", "abort"}) {
    registry_.GetCounter("gemma_request_success_total", {reason});
  }
  for (const char* name :
       {"gemma_time_to_first_token_seconds", "gemma_inter_token_latency_seconds",
        "gemma_e2e_request_latency_seconds", "gemma_request_queue_time_seconds",
        "gemma_request_prompt_tokens", "gemma_request_generation_tokens", "gemma_batch_size"}) {
    registry_.GetHistogram(name);
  }
}

void ServerMetrics::OnStep(int batch_size) {
  registry_.GetHistogram("gemma_batch_size").Observe(batch_size);
}

void ServerMetrics::OnInterTokenGap(double gap_s, int num_tokens) {
  if (num_tokens <= 0) return;
  Histogram& itl = registry_.GetHistogram("gemma_inter_token_latency_seconds");
  for (int i = 0; i < num_tokens; ++i) itl.Observe(gap_s / num_tokens);
}

void ServerMetrics::OnFinished(const GenerationEvent& event) {
  if (!event.error.ok()) {
    OnRejected(absl::StatusCodeToString(event.error.code()));
    return;
  }
  const char* reason = FinishedReasonLabel(event.finish_reason);
  if (*reason != '\0') registry_.GetCounter("gemma_request_success_total", {reason}).Inc();
  const Timings& t = event.timings;
  registry_.GetHistogram("gemma_request_queue_time_seconds").Observe(t.queue_ms / 1e3);
  registry_.GetHistogram("gemma_e2e_request_latency_seconds").Observe(t.total_ms / 1e3);
  if (event.usage.completion_tokens > 0) {
    registry_.GetHistogram("gemma_time_to_first_token_seconds")
        .Observe(t.time_to_first_token_ms / 1e3);
  }
  registry_.GetHistogram("gemma_request_prompt_tokens").Observe(event.usage.prompt_tokens);
  registry_.GetHistogram("gemma_request_generation_tokens").Observe(event.usage.completion_tokens);
}

void ServerMetrics::OnRejected(const std::string& code) {
  registry_.GetCounter("gemma_request_failure_total", {code}).Inc();
}

void ServerMetrics::SetEngineFigures(const EngineStats& s) {
  MetricsRegistry& r = registry_;
  r.GetGauge("gemma_num_requests_running").Set(s.running);
  r.GetGauge("gemma_num_requests_waiting").Set(s.waiting);
  const int used = s.kv_total_blocks - s.kv_free_blocks;
  r.GetGauge("gemma_kv_cache_used_blocks").Set(used);
  r.GetGauge("gemma_kv_cache_free_blocks").Set(s.kv_free_blocks);
  r.GetGauge("gemma_kv_cache_block_size_tokens").Set(s.kv_block_size);
  r.GetGauge("gemma_kv_cache_usage_perc")
      .Set(s.kv_total_blocks > 0 ? static_cast<double>(used) / s.kv_total_blocks : 0.0);
  r.GetCounter("gemma_prefix_cache_queries_total").Set(static_cast<double>(s.prefix_cache_queries));
  r.GetCounter("gemma_prefix_cache_hits_total").Set(static_cast<double>(s.prefix_cache_hits));
  // A router compares replicas by this without a PromQL rate() of its own.
  r.GetGauge("gemma_prefix_cache_hit_rate")
      .Set(s.prefix_cache_queries > 0
               ? static_cast<double>(s.prefix_cache_hits) / s.prefix_cache_queries
               : 0.0);
  r.GetCounter("gemma_prompt_tokens_total").Set(static_cast<double>(s.prompt_tokens));
  r.GetCounter("gemma_generation_tokens_total").Set(static_cast<double>(s.generated_tokens));
  r.GetCounter("gemma_num_preemptions_total").Set(static_cast<double>(s.preemptions));
  r.GetCounter("gemma_engine_steps_total").Set(static_cast<double>(s.steps));
  r.GetCounter("gemma_engine_step_seconds_total", {"schedule"}).Set(s.schedule_seconds);
  r.GetCounter("gemma_engine_step_seconds_total", {"forward"}).Set(s.forward_seconds);
  r.GetCounter("gemma_engine_step_seconds_total", {"commit"}).Set(s.commit_seconds);
}

std::string ServerMetrics::Render(const EngineStats& stats,
                                  std::optional<size_t> device_memory_used_bytes) {
  SetEngineFigures(stats);
  if (device_memory_used_bytes) {
    registry_.GetGauge("gemma_gpu_memory_used_bytes")
        .Set(static_cast<double>(*device_memory_used_bytes));
  }
  return registry_.Render();
}

}  // namespace gemma::server::ops
