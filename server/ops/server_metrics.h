// gemma-serve's metrics: the gemma_* families (names follow vLLM's, so a
// vLLM or TGI dashboard maps over), fed by the engine's step hook, by
// OpsEngine per request event, and by the engine's stats at scrape time.
//
// Thread-safety: every method is safe from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "engine/core/engine.h"
#include "engine/core/request.h"
#include "server/ops/metrics.h"

namespace gemma::server::ops {

class ServerMetrics {
 public:
  ServerMetrics();

  // One engine step of `batch_size` sequences (engine thread).
  void OnStep(int batch_size);
  // `gap_s` between two consecutive token-carrying events of one request,
  // which carried `num_tokens` tokens: each gets gap_s / num_tokens.
  void OnInterTokenGap(double gap_s, int num_tokens);
  // The last event of a request that reached the engine.
  void OnFinished(const GenerationEvent& event);
  // A Generate refused before it reached the engine (`code` as a name, e.g.
  // "INVALID_ARGUMENT").
  void OnRejected(const std::string& code);

  // Refreshes the gauges and mirrored counters, then renders everything.
  std::string Render(const EngineStats& stats, std::optional<size_t> device_memory_used_bytes);

  MetricsRegistry& registry() { return registry_; }

 private:
  void SetEngineFigures(const EngineStats& stats);

  MetricsRegistry registry_;
};

// vLLM's finished_reason label for an engine finish reason: "stop", "length"
// or "abort" (empty for kNone / kError).
const char* FinishedReasonLabel(FinishReason reason);

}  // namespace gemma::server::ops
