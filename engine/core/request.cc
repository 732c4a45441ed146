#include "engine/core/request.h"

namespace gemma {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStopToken: return "stop_token";
    case FinishReason::kStopString: return "stop_string";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
    case FinishReason::kToolCalls: return "tool_calls";
  }
  return "unknown";
}

}  // namespace gemma
