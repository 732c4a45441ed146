// The per-input body of the Generate-request fuzzer, shared by the libFuzzer
// entry point and request_corpus_test (which replays the corpus under g++ in
// CI). Input: bytes of a serialized gemma.v1.GenerateRequest, converted by
// the server and admitted by the engine's validation as Submit does. Beyond
// "does not crash", an admitted request must satisfy what the engine relies
// on (the context and the operator limits hold, min_tokens fits); any
// refusal must be INVALID_ARGUMENT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/request_validation.h"
#include "engine/tokenizer/tokenizer.h"
#include "gemma/v1/gemma.pb.h"
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
  const AdmissionLimits admission{
      .vocab_size = tokenizer.vocab_size(),
      .tokens = {.max_context = limits.max_context, .max_prompt_tokens = 64, .max_total_tokens = 128}};
  const absl::Status admitted = ValidateRequest(admission, nullptr, &*built);
  if (!admitted.ok()) {
    RequireRequest(admitted.code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  const StoppingCriteria& stopping = built->stopping;
  const int prompt_tokens = static_cast<int>(built->prompt_ids.size());
  RequireRequest(prompt_tokens >= 1 && prompt_tokens <= admission.tokens.max_prompt_tokens);
  RequireRequest(stopping.max_tokens.has_value() && *stopping.max_tokens >= 1);
  RequireRequest(prompt_tokens + *stopping.max_tokens <= admission.tokens.max_context);
  RequireRequest(prompt_tokens + *stopping.max_tokens <= admission.tokens.max_total_tokens);
  RequireRequest(stopping.min_tokens >= 0 && stopping.min_tokens <= *stopping.max_tokens);
  // Admission is idempotent: the resolved request passes again unchanged.
  GenerationRequest again = *built;
  RequireRequest(ValidateRequest(admission, nullptr, &again).ok());
  RequireRequest(again.stopping.max_tokens == stopping.max_tokens);
}

}  // namespace gemma::fuzz
