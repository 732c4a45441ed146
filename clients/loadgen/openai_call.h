// One measured streaming /v1/completions request on the OpenAI-compatible
// HTTP API (gemma-serve --http-port), for `gemma-loadgen --protocol openai`.
//
// Synchronous Boost.Beast over a fresh connection per request, run on a
// thread of its own by the runner: an HTTP/1.1 connection carries one stream
// at a time, so concurrency N means N connections either way. TTFT and E2E
// count from the moment the request is written (after the TCP connect).
//
// Tokens: a chunk names no token ids, so output_tokens is the final usage's
// completion_tokens (else the number of text-bearing chunks). When every
// token came in its own chunk, each chunk gap is one ITL entry; otherwise
// (a token without text of its own, or tokens merged into one chunk) the
// span from the first to the last chunk is split evenly over the tokens.
//
// Thread-safety: a free function; calls on different threads are independent.
#pragma once

#include <string>

#include "clients/loadgen/generate_call.h"
#include "clients/loadgen/request_result.h"
#include "clients/loadgen/workload.h"
#include "nlohmann/json.hpp"

namespace gemma::loadgen {

// "host:port" split; false when `addr` has no port.
bool SplitHostPort(const std::string& addr, std::string* host, std::string* port);

// The /v1/completions body for `spec`, the index-th request of a run.
nlohmann::json MakeCompletionBody(const RequestSpec& spec, const CallSettings& settings, int index);

// Sends the request to `http_addr` and reads its event stream to the end.
RequestResult RunCompletion(const std::string& http_addr, const RequestSpec& spec,
                            const CallSettings& settings, int index);

}  // namespace gemma::loadgen
