#include "server/submission.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gemma::server {

absl::StatusOr<GenerationRequest> PrepareGeneration(const SubmitPath& path,
                                                    const v1::GenerateRequest& request,
                                                    std::string id) {
  absl::StatusOr<GenerationRequest> built =
      BuildGenerationRequest(request, id, *path.tokenizer, *path.limits);
  if (!built.ok()) return built.status();
  if (absl::Status s = ops::ApplyRequestLimits(request, *path.ops_limits, &*built); !s.ok()) {
    return s;
  }
  if (!path.calls->Add(id)) {
    return absl::AlreadyExistsError(absl::StrCat("request_id '", id, "' is already in flight"));
  }
  return built;
}

}  // namespace gemma::server
