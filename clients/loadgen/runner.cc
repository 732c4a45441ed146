#include "clients/loadgen/runner.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "clients/loadgen/openai_call.h"

namespace gemma::loadgen {
namespace {

// Counts open streams; the dispatch thread waits here for a free slot while
// gRPC threads release slots as streams close.
class InFlightLimiter {
 public:
  explicit InFlightLimiter(int max_in_flight) : max_in_flight_(max_in_flight) {}

  void Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return max_in_flight_ <= 0 || num_in_flight_ < max_in_flight_; });
    ++num_in_flight_;
  }
  // Notifies under the lock so that WaitIdle's caller cannot destroy the
  // limiter while a releasing thread still touches it.
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    --num_in_flight_;
    changed_.notify_all();
  }
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return num_in_flight_ == 0; });
  }

 private:
  const int max_in_flight_;
  std::mutex mu_;
  std::condition_variable changed_;
  int num_in_flight_ = 0;
};

std::string RandomHex32() {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", std::random_device()());
  return text;
}

// The set-up calls (model info, tokenize) carry the API key like the load.
void PrepareSetupCall(const CallSettings& settings, grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!settings.api_key.empty()) context->AddMetadata("authorization", "Bearer " + settings.api_key);
}

}  // namespace

LoadRunner::LoadRunner(const LoadgenOptions& options)
    : protocol_(options.protocol),
      http_addr_(options.http_addr),
      settings_{options.api_key, options.timeout_s, options.ignore_eos, options.temperature,
                options.seed},
      request_id_prefix_("loadgen-" + RandomHex32()) {
  for (int i = 0; i < options.num_channels; ++i) {
    // A local subchannel pool gives each channel its own HTTP/2 connection
    // (channels with equal arguments would otherwise share one), so that one
    // connection's flow control and framing do not cap a high-concurrency run.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channels_.push_back(
        grpc::CreateCustomChannel(options.addr, grpc::InsecureChannelCredentials(), args));
    stubs_.push_back(v1::Gemma::NewStub(channels_.back()));
  }
}

bool LoadRunner::Connect(std::string* error) {
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(30);
  for (size_t i = 0; i < channels_.size(); ++i) {
    if (!channels_[i]->WaitForConnected(deadline)) {
      *error = "channel " + std::to_string(i) + " could not connect within 30 s";
      return false;
    }
  }
  return true;
}

bool LoadRunner::FetchModelLimits(ModelLimits* limits, std::string* error) {
  v1::Gemma::Stub& stub = *stubs_.front();
  grpc::ClientContext info_context;
  PrepareSetupCall(settings_, &info_context);
  v1::ModelInfo info;
  grpc::Status status = stub.GetModelInfo(&info_context, v1::GetModelInfoRequest(), &info);
  if (!status.ok()) {
    *error = "GetModelInfo: " + StatusCodeName(status.error_code()) + ": " +
             status.error_message();
    return false;
  }
  limits->vocab_size = info.vocab_size();
  limits->context_length = info.context_length();
  // The BOS id is the one extra id that add_bos puts in front of a text.
  v1::TokenizeResponse with_bos, without_bos;
  v1::TokenizeRequest request;
  request.set_text("a");
  request.set_add_bos(true);
  grpc::ClientContext with_context, without_context;
  PrepareSetupCall(settings_, &with_context);
  PrepareSetupCall(settings_, &without_context);
  if (stub.Tokenize(&with_context, request, &with_bos).ok()) {
    request.set_add_bos(false);
    if (stub.Tokenize(&without_context, request, &without_bos).ok() &&
        with_bos.ids_size() == without_bos.ids_size() + 1) {
      limits->bos_id = with_bos.ids(0);
    }
  }
  return true;
}

void LoadRunner::StartRequest(const RequestSpec& spec, int index, const std::string& request_id,
                              RunOutcome* outcome, std::function<void()> done) {
  if (protocol_ == Protocol::kOpenAi) {
    // A thread per stream: HTTP/1.1 holds one stream per connection, and the
    // limiter bounds how many are open.
    std::thread([this, spec, index, outcome, done = std::move(done)] {
      outcome->results[index] = RunCompletion(http_addr_, spec, settings_, index);
      done();
    }).detach();
    return;
  }
  v1::GenerateRequest request = MakeGenerateRequest(spec, settings_, index, request_id);
  GenerateCall::Start(stubs_[index % stubs_.size()].get(), std::move(request), settings_,
                      [outcome, index, done = std::move(done)](RequestResult result) {
                        outcome->results[index] = std::move(result);
                        done();
                      });
}

RunOutcome LoadRunner::Run(const std::vector<RequestSpec>& specs,
                           const std::vector<double>& arrivals_s, int max_in_flight) {
  using Clock = std::chrono::steady_clock;
  RunOutcome outcome;
  outcome.results.resize(specs.size());
  InFlightLimiter limiter(max_in_flight);
  const std::string run_prefix = request_id_prefix_ + "-" + std::to_string(num_runs_++) + "-";
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < specs.size(); ++i) {
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(arrivals_s[i])));
    limiter.Acquire();
    // Each call writes only its own slot; WaitIdle orders those writes
    // before the reads below.
    StartRequest(specs[i], static_cast<int>(i), run_prefix + std::to_string(i), &outcome,
                 [&limiter] { limiter.Release(); });
  }
  limiter.WaitIdle();
  outcome.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  return outcome;
}

}  // namespace gemma::loadgen
