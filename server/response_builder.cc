#include "server/response_builder.h"

namespace gemma::server {
namespace {

void AppendLogprobs(const GenerationEvent& event, v1::GenerateResponse* out) {
  for (const SampleResult& sample : event.logprobs) {
    v1::TokenLogprob* entry = out->add_logprobs();
    entry->set_token_id(sample.token_id);
    entry->set_logprob(sample.logprob);
    for (const TokenLogprob& alt : sample.top) {
      v1::TopLogprob* top = entry->add_top();
      top->set_token_id(alt.token_id);
      top->set_logprob(alt.logprob);
    }
  }
}

void SetFinish(const GenerationEvent& event, v1::Finish* finish) {
  finish->set_reason(ToProtoFinishReason(event.finish_reason));
  if (event.finish_reason == FinishReason::kStopString) {
    finish->set_stop_string(event.matched_stop);
  } else if (event.matched_stop_token >= 0) {
    finish->set_stop_token_id(event.matched_stop_token);
  }
  v1::Usage* usage = finish->mutable_usage();
  usage->set_prompt_tokens(event.usage.prompt_tokens);
  usage->set_completion_tokens(event.usage.completion_tokens);
  usage->set_cached_tokens(event.usage.cached_tokens);
  v1::Timings* timings = finish->mutable_timings();
  timings->set_queue_ms(event.timings.queue_ms);
  timings->set_time_to_first_token_ms(event.timings.time_to_first_token_ms);
  timings->set_total_ms(event.timings.total_ms);
}

}  // namespace

v1::FinishReason ToProtoFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEos: return v1::FINISH_REASON_EOS;
    case FinishReason::kStopToken: return v1::FINISH_REASON_STOP_TOKEN;
    case FinishReason::kStopString: return v1::FINISH_REASON_STOP_STRING;
    case FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case FinishReason::kCancelled: return v1::FINISH_REASON_CANCELLED;
    case FinishReason::kToolCalls: return v1::FINISH_REASON_TOOL_CALLS;
    case FinishReason::kNone:
    case FinishReason::kError: break;  // errors end the call with a status instead
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

void AppendEvent(const GenerationEvent& event, v1::GenerateResponse* out) {
  out->mutable_token_ids()->Add(event.token_ids.begin(), event.token_ids.end());
  out->mutable_text()->append(event.text_delta);
  out->mutable_reasoning()->append(event.reasoning_delta);
  for (const ToolCall& call : event.tool_calls) {
    v1::ToolCall* entry = out->add_tool_calls();
    entry->set_id(call.id);
    entry->set_name(call.name);
    entry->set_arguments(call.arguments.dump());
  }
  AppendLogprobs(event, out);
  if (event.finished) SetFinish(event, out->mutable_finish());
}

}  // namespace gemma::server
