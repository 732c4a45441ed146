#include "engine/core/request_validation.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gemma {
namespace {

using absl::InvalidArgumentError;
using absl::StrCat;

absl::Status CheckIds(const std::vector<int32_t>& ids, int vocab_size, const char* field) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return InvalidArgumentError(StrCat(field, "[", i, "] = ", ids[i], " is outside the vocabulary [0, ",
                                         vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSampling(const SamplingParams& sampling) {
  if (sampling.num_logprobs < -1 || sampling.num_logprobs > kMaxLogprobs) {
    return InvalidArgumentError(
        StrCat("logprobs must be in [0, ", kMaxLogprobs, "], got ", sampling.num_logprobs));
  }
  const absl::Status status = ValidateSamplingParams(sampling);
  if (status.ok()) return status;
  return absl::Status(status.code(), StrCat("sampling.", status.message()));
}

absl::Status CheckStops(const StoppingCriteria& s, int vocab_size) {
  if (s.min_tokens < 0 || s.min_tokens > *s.max_tokens) {
    return InvalidArgumentError(StrCat("stopping.min_tokens must be in [0, max_tokens = ", *s.max_tokens,
                                       "], got ", s.min_tokens));
  }
  if (s.stop_strings.size() > kMaxStopStrings) {
    return InvalidArgumentError(StrCat("stopping.stop has ", s.stop_strings.size(), " strings; at most ",
                                       kMaxStopStrings, " are allowed"));
  }
  for (size_t i = 0; i < s.stop_strings.size(); ++i) {
    const std::string field = StrCat("stopping.stop[", i, "]");
    if (s.stop_strings[i].empty()) return InvalidArgumentError(StrCat(field, " must not be empty"));
    if (s.stop_strings[i].size() > kMaxStopStringBytes) {
      return InvalidArgumentError(StrCat(field, " is ", s.stop_strings[i].size(), " bytes; at most ",
                                         kMaxStopStringBytes, " are allowed"));
    }
  }
  return CheckIds(s.stop_token_ids, vocab_size, "stopping.stop_token_ids");
}

}  // namespace

absl::Status ValidateRequest(const AdmissionLimits& limits, const KvPoolCheck& pool,
                             GenerationRequest* request) {
  if (absl::Status s = CheckSampling(request->sampling); !s.ok()) return s;
  if (request->prompt_ids.empty()) return InvalidArgumentError("prompt must not be empty");
  if (absl::Status s = CheckIds(request->prompt_ids, limits.vocab_size, "tokens.ids"); !s.ok()) return s;
  StoppingCriteria& stopping = request->stopping;
  absl::StatusOr<int> max_tokens = ResolveMaxTokens(static_cast<int>(request->prompt_ids.size()),
                                                    stopping.max_tokens, limits.tokens, pool);
  if (!max_tokens.ok()) return max_tokens.status();
  stopping.max_tokens = *max_tokens;
  return CheckStops(stopping, limits.vocab_size);
}

}  // namespace gemma
