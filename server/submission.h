// The one way from a gemma.v1.GenerateRequest into the engine, shared by the
// gRPC front (GemmaService) and the OpenAI-compatible HTTP front: its id is
// registered among the calls in flight as the call arrives (RegisterCall: a
// drain waits for it from then on, queued or not, and the engine's
// cancel-by-id stays unambiguous); then, on a PreparePool worker, the request
// is built (PrepareGeneration: BuildGenerationRequest tokenizes, which takes
// seconds for a multi-megabyte prompt; the engine checks its meaning at
// Submit, the operator's token limits included).
//
// Thread-safety: both functions are safe from any thread (ActiveCalls
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
#include "server/prepare_pool.h"
#include "server/request_builder.h"

namespace gemma::server {

// What a front needs to reach the engine; filled by GemmaService::Attach.
struct SubmitPath {
  Engine* engine = nullptr;  // the OpsEngine (metrics, stream cap, timeout)
  const Tokenizer* tokenizer = nullptr;
  const ServingLimits* limits = nullptr;
  const ops::RequestLimits* ops_limits = nullptr;
  ActiveCalls* calls = nullptr;
  PreparePool* pool = nullptr;  // where PrepareGeneration runs
};

// Registers `id` in `path.calls`; ALREADY_EXISTS when it is in flight. The
// caller removes it once the request's last event arrived, or it was never
// submitted.
absl::Status RegisterCall(const SubmitPath& path, const std::string& id);

// The size of `request`'s prompt in bytes (text, or the chat message), for
// PreparePool::Post.
size_t PromptBytes(const v1::GenerateRequest& request);

// Gives the transient memory of encoding a prompt of `bytes` back to the
// system when it was large (glibc keeps freed heap in per-thread arenas).
void TrimAfterLargePrompt(size_t bytes);

// The engine request for `request` under `id` (registered by RegisterCall),
// or INVALID_ARGUMENT naming the proto field. Tokenizes: call it on a
// PreparePool worker, not on a thread that serves other calls.
absl::StatusOr<GenerationRequest> PrepareGeneration(const SubmitPath& path,
                                                    const v1::GenerateRequest& request,
                                                    std::string id);

}  // namespace gemma::server
