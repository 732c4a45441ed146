// Presents a run's metrics: a human-readable table and a JSON document
// (the same numbers; milliseconds for latencies, per-second throughputs).
#pragma once

#include <iosfwd>

#include "clients/loadgen/flags.h"
#include "clients/loadgen/stats.h"
#include "nlohmann/json.hpp"

namespace gemma::loadgen {

void PrintTable(const BenchmarkMetrics& metrics, std::ostream& out);

// {"config": {...the flags...}, "duration_s", "completed", "failed",
//  "failures_by_code": {...}, token totals, throughputs,
//  "ttft_ms" | "tpot_ms" | "itl_ms" | "e2e_ms": {"count","mean","p50","p90","p99"}}
nlohmann::json MetricsToJson(const BenchmarkMetrics& metrics, const LoadgenOptions& options);

}  // namespace gemma::loadgen
