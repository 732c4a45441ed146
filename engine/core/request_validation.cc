#include "engine/core/request_validation.h"

#include "absl/strings/str_cat.h"

namespace gemma {

absl::Status ValidateRequest(const GenerationRequest& r, int vocab_size, int max_context) {
  using absl::InvalidArgumentError;
  using absl::StrCat;
  if (r.prompt_ids.empty()) return InvalidArgumentError("prompt must not be empty");
  for (size_t i = 0; i < r.prompt_ids.size(); ++i) {
    const int32_t id = r.prompt_ids[i];
    if (id < 0 || id >= vocab_size)
      return InvalidArgumentError(StrCat("token_ids[", i, "] = ", id, " is outside the vocabulary [0, ", vocab_size, ")"));
  }
  const StoppingCriteria& s = r.stopping;
  if (s.max_tokens < 1) return InvalidArgumentError(StrCat("max_tokens must be >= 1, got ", s.max_tokens));
  if (s.min_tokens < 0) return InvalidArgumentError(StrCat("min_tokens must be >= 0, got ", s.min_tokens));
  if (s.min_tokens > s.max_tokens)
    return InvalidArgumentError(StrCat("min_tokens (", s.min_tokens, ") must not exceed max_tokens (", s.max_tokens, ")"));
  const int64_t total = static_cast<int64_t>(r.prompt_ids.size()) + s.max_tokens;
  if (total > max_context)
    return InvalidArgumentError(StrCat("prompt tokens (", r.prompt_ids.size(), ") + max_tokens (", s.max_tokens,
                                       ") = ", total, " exceeds the context length ", max_context));
  if (s.stop_strings.size() > kMaxStopStrings)
    return InvalidArgumentError(StrCat("stop: at most ", kMaxStopStrings, " stop strings, got ", s.stop_strings.size()));
  for (size_t i = 0; i < s.stop_strings.size(); ++i) {
    if (s.stop_strings[i].size() > kMaxStopStringBytes)
      return InvalidArgumentError(StrCat("stop[", i, "] is ", s.stop_strings[i].size(), " bytes, more than ", kMaxStopStringBytes));
    if (s.stop_strings[i].empty()) return InvalidArgumentError(StrCat("stop[", i, "] must not be empty"));
  }
  for (size_t i = 0; i < s.stop_token_ids.size(); ++i) {
    const int32_t id = s.stop_token_ids[i];
    if (id < 0 || id >= vocab_size)
      return InvalidArgumentError(StrCat("stop_token_ids[", i, "] = ", id, " is outside the vocabulary [0, ", vocab_size, ")"));
  }
  if (r.sampling.num_logprobs > kMaxLogprobs)
    return InvalidArgumentError(StrCat("logprobs must be <= ", kMaxLogprobs, ", got ", r.sampling.num_logprobs));
  return ValidateSamplingParams(r.sampling);
}

}  // namespace gemma
