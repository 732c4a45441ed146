// The one way from a gemma.v1.GenerateRequest into the engine, shared by the
// gRPC front (GemmaService) and the OpenAI-compatible HTTP front: the request
// is built (BuildGenerationRequest; the engine checks it at Submit, the
// operator's token limits included), and its id is registered among the
// calls in flight (so a drain waits for it and the engine's cancel-by-id
// stays unambiguous).
//
// Thread-safety: PrepareGeneration is safe from any thread (ActiveCalls
// locks); the pointed-to objects must outlive every call.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/core/engine.h"
#include "engine/core/request.h"
#include "engine/tokenizer/tokenizer.h"
#include "gemma/v1/gemma.pb.h"
#include "server/active_calls.h"
#include "server/ops/limits.h"
#include "server/request_builder.h"

namespace gemma::server {

// What a front needs to reach the engine; filled by GemmaService::Attach.
struct SubmitPath {
  Engine* engine = nullptr;  // the OpsEngine (metrics, stream cap, timeout)
  const Tokenizer* tokenizer = nullptr;
  const ServingLimits* limits = nullptr;
  const ops::RequestLimits* ops_limits = nullptr;
  ActiveCalls* calls = nullptr;
};

// The engine request for `request` under `id`, registered in `path.calls`.
// INVALID_ARGUMENT naming the proto field, or ALREADY_EXISTS when `id` is in
// flight; nothing is registered on error. The caller submits it and removes
// the id once the request's last event arrived (or Submit refused it).
absl::StatusOr<GenerationRequest> PrepareGeneration(const SubmitPath& path,
                                                    const v1::GenerateRequest& request,
                                                    std::string id);

}  // namespace gemma::server
