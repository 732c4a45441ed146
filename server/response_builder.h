// Turns engine events into API stream messages. Several events may be merged
// into one message when the client reads slower than the engine produces.
//
// Thread-safety: free functions; the caller owns the message.
#pragma once

#include "engine/core/request.h"
#include "gemma/v1/gemma.pb.h"

namespace gemma::server {

v1::FinishReason ToProtoFinishReason(FinishReason reason);

// Appends the event's tokens, text and logprobs to `out`, and its finish
// (reason, matched stop, usage, timings) when the event is the last. The
// request id is the stream's to set.
void AppendEvent(const GenerationEvent& event, v1::GenerateResponse* out);

}  // namespace gemma::server
