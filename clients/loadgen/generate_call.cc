#include "clients/loadgen/generate_call.h"

#include <iterator>
#include <utility>
#include "absl/status/status.h"

namespace gemma::loadgen {
namespace {

double MillisecondsBetween(std::chrono::steady_clock::time_point from,
                           std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace

v1::GenerateRequest MakeGenerateRequest(const RequestSpec& spec, const CallSettings& settings,
                                        int index, const std::string& request_id) {
  v1::GenerateRequest request;
  request.set_request_id(request_id);
  if (spec.prompt_ids.empty()) {
    request.set_text(spec.prompt_text);
  } else {
    request.mutable_tokens()->mutable_ids()->Add(spec.prompt_ids.begin(), spec.prompt_ids.end());
  }
  request.mutable_sampling()->set_temperature(settings.temperature);
  if (settings.temperature > 0) request.mutable_sampling()->set_seed(settings.seed + index);
  request.mutable_stopping()->set_max_tokens(spec.max_tokens);
  request.mutable_stopping()->set_ignore_eos(settings.ignore_eos);
  return request;
}

std::string StatusCodeName(grpc::StatusCode code) {
  // grpc::StatusCode and absl::StatusCode share their numbering.
  const std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "CODE_" + std::to_string(static_cast<int>(code)) : name;
}

GenerateCall::GenerateCall(v1::GenerateRequest request, DoneCallback done)
    : request_(std::move(request)), done_(std::move(done)) {
  result_.prompt_tokens = request_.tokens().ids_size();
  result_.itl_ms.reserve(request_.stopping().max_tokens());
}

void GenerateCall::Start(v1::Gemma::Stub* stub, v1::GenerateRequest request,
                         const CallSettings& settings, DoneCallback done) {
  // Owned by gRPC from here on: OnDone deletes it.
  auto* call = new GenerateCall(std::move(request), std::move(done));
  call->context_.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::microseconds(static_cast<int64_t>(settings.timeout_s * 1e6)));
  if (!settings.api_key.empty()) {
    call->context_.AddMetadata("authorization", "Bearer " + settings.api_key);
  }
  stub->async()->Generate(&call->context_, &call->request_, call);
  call->StartRead(&call->response_);
  call->sent_ = Clock::now();
  call->StartCall();
}

void GenerateCall::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended; OnDone follows
  const Clock::time_point now = Clock::now();
  const int num_tokens = response_.token_ids_size();
  if (num_tokens > 0) {
    if (result_.output_tokens == 0) {
      result_.ttft_ms = MillisecondsBetween(sent_, now);
    } else {
      const double per_token_ms = MillisecondsBetween(last_token_, now) / num_tokens;
      result_.itl_ms.insert(result_.itl_ms.end(), num_tokens, per_token_ms);
    }
    last_token_ = now;
    result_.output_tokens += num_tokens;
  }
  if (response_.has_finish()) {
    has_finish_ = true;
    result_.prompt_tokens = response_.finish().usage().prompt_tokens();
  }
  StartRead(&response_);
}

void GenerateCall::OnDone(const grpc::Status& status) {
  result_.e2e_ms = MillisecondsBetween(sent_, Clock::now());
  result_.ok = status.ok() && has_finish_;
  result_.error_code = StatusCodeName(status.error_code());
  result_.error_message = status.error_message();
  if (status.ok() && !has_finish_) {
    // A stream that closes OK without its final message lost the finish.
    result_.error_code = "NO_FINISH";
    result_.error_message = "the stream ended without a finish message";
  }
  done_(std::move(result_));
  delete this;
}

}  // namespace gemma::loadgen
