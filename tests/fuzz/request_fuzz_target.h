// The per-input body of the Generate-request fuzzer, shared by the libFuzzer
// entry point and request_corpus_test (which replays the corpus under g++ in
// CI). Input: bytes of a serialized gemma.v1.GenerateRequest. Beyond "does
// not crash", a request that passes the server's validation must satisfy
// what the engine relies on (its own validator accepts it; the context and
// the operator limits hold); any refusal must be INVALID_ARGUMENT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/request_validation.h"
#include "engine/tokenizer/tokenizer.h"
#include "gemma/v1/gemma.pb.h"
#include "server/ops/limits.h"
#include "server/request_builder.h"

namespace gemma::fuzz {

inline void RequireRequest(bool condition) {
  if (!condition) __builtin_trap();
}

// REQUIRES: GEMMA_FUZZ_TOKENIZER names the demo model's tokenizer.model.
inline const Tokenizer& FuzzTokenizer() {
  static const Tokenizer* tokenizer = [] {
    auto loaded = Tokenizer::Load(GEMMA_FUZZ_TOKENIZER);
    if (!loaded.ok()) __builtin_trap();
    return loaded->release();
  }();
  return *tokenizer;
}

inline void FuzzGenerateRequest(const uint8_t* data, size_t size) {
  v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  const Tokenizer& tokenizer = FuzzTokenizer();
  const server::ServingLimits limits{.max_context = 512, .vocab_size = tokenizer.vocab_size()};
  absl::StatusOr<GenerationRequest> built =
      server::BuildGenerationRequest(request, "fuzz", tokenizer, limits);
  if (!built.ok()) {
    RequireRequest(built.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  const StoppingCriteria& stopping = built->stopping;
  const int prompt_tokens = static_cast<int>(built->prompt_ids.size());
  RequireRequest(prompt_tokens >= 1);
  RequireRequest(stopping.max_tokens >= 1 &&
                 prompt_tokens + stopping.max_tokens <= limits.max_context);
  RequireRequest(stopping.min_tokens >= 0 && stopping.min_tokens <= stopping.max_tokens);
  RequireRequest(ValidateRequest(*built, limits.vocab_size, limits.max_context).ok());

  const server::ops::RequestLimits ops_limits{.max_prompt_tokens = 64, .max_total_tokens = 128};
  absl::Status limited = server::ops::ApplyRequestLimits(request, ops_limits, &*built);
  if (!limited.ok()) {
    RequireRequest(limited.code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  RequireRequest(prompt_tokens <= ops_limits.max_prompt_tokens);
  RequireRequest(prompt_tokens + built->stopping.max_tokens <= ops_limits.max_total_tokens);
  RequireRequest(built->stopping.min_tokens <= built->stopping.max_tokens);
}

}  // namespace gemma::fuzz
