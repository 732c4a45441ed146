// gemma-loadgen: a load generator for gemma-serve's Generate stream, in the
// manner of `vllm bench serve`.
//   gemma-loadgen --addr 127.0.0.1:50051 --concurrency 8 --num-requests 32
//                 --input-len 64 --output-len 32 --ignore-eos --json result.json
// Prints a table, then the JSON result as stdout's last line.
// Exit codes: 0 every request completed, 3 some failed (see the report),
// 1 the server could not be queried or the workload does not fit, 2 bad flags.
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "clients/loadgen/flags.h"
#include "clients/loadgen/report.h"
#include "clients/loadgen/runner.h"
#include "clients/loadgen/stats.h"
#include "clients/loadgen/workload.h"

using namespace gemma::loadgen;

namespace {

// Independent streams from one --seed, so that e.g. changing the warm-up
// count leaves the measured prompts and arrivals unchanged.
constexpr uint64_t kWarmupSeedSalt = 0x5741524d5550ULL;
constexpr uint64_t kArrivalSeedSalt = 0x415252495645ULL;

void RunWarmup(LoadRunner& runner, const LoadgenOptions& options, const ModelLimits& limits) {
  if (options.warmup_requests == 0) return;
  const int num = options.warmup_requests;
  const std::vector<RequestSpec> specs =
      BuildWorkload(options, limits, num, options.seed ^ kWarmupSeedSalt);
  const int max_in_flight = MaxInFlight(options);
  RunOutcome outcome = runner.Run(specs, std::vector<double>(num, 0.0),
                                  max_in_flight > 0 ? max_in_flight : num);
  int num_failed = 0;
  for (const RequestResult& r : outcome.results) num_failed += r.ok ? 0 : 1;
  std::cerr << "warm-up: " << num << " requests, " << num_failed << " failed\n";
}

bool WriteJson(const std::string& path, const nlohmann::json& json) {
  std::ofstream file(path);
  file << json.dump(2) << "\n";
  return static_cast<bool>(file);
}

}  // namespace

int main(int argc, char** argv) {
  ParsedOptions parsed = ParseLoadgenFlags(argc, argv);
  if (!parsed.options) return parsed.exit_code;
  const LoadgenOptions& options = *parsed.options;

  LoadRunner runner(options);
  ModelLimits limits;
  std::string error;
  if (!runner.FetchModelLimits(&limits, &error) || !runner.Connect(&error)) {
    std::cerr << "error: " << error << "\n";
    return 1;
  }
  if (error = CheckWorkloadFits(options, limits); !error.empty()) {
    std::cerr << "error: " << error << "\n";
    return 1;
  }
  RunWarmup(runner, options, limits);

  const std::vector<RequestSpec> specs =
      BuildWorkload(options, limits, options.num_requests, options.seed);
  const std::vector<double> arrivals =
      options.concurrency
          ? std::vector<double>(options.num_requests, 0.0)
          : PoissonArrivals(options.request_rate, options.num_requests,
                            options.seed ^ kArrivalSeedSalt);
  const RunOutcome outcome = runner.Run(specs, arrivals, MaxInFlight(options));
  const BenchmarkMetrics metrics = ComputeMetrics(outcome.results, outcome.duration_s);

  PrintTable(metrics, std::cout);
  const nlohmann::json json = MetricsToJson(metrics, options);
  if (!options.json_path.empty() && !WriteJson(options.json_path, json)) {
    std::cerr << "error: cannot write " << options.json_path << "\n";
    return 1;
  }
  std::cout << json.dump() << std::endl;
  // Ends without running destructors: a callback reactor's last reference to
  // its call (and so to the channel) is dropped by gRPC after OnDone returns,
  // so tearing the channels down right after the last result arrived races
  // gRPC's own clean-up (it aborted in ref_counted.h). Everything the run
  // produced is written and flushed above.
  std::_Exit(metrics.num_failed == 0 ? 0 : 3);
}
