#include "server/submission.h"

#include <malloc.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gemma::server {
namespace {

// Prompts at least this large give their transient memory back to the system
// once built: glibc keeps freed heap in its per-thread arenas, so a few
// multi-megabyte prompts would otherwise leave the process a GB larger.
constexpr size_t kTrimAfterPromptBytes = size_t{256} << 10;

// Refuses a text prompt that its length in bytes alone proves longer than a
// prompt may be, before encoding it: no token stands for more than
// max_bytes_per_token() bytes, so B bytes are at least ceil(B / that) tokens
// after BOS. (Encoding 4 MB of text takes seconds and ~1 GB.) Chat prompts
// are not bounded this way: a template may rewrite or trim their contents.
absl::Status CheckTextLength(const v1::GenerateRequest& request, const SubmitPath& path) {
  const size_t bytes_per_token = path.tokenizer->max_bytes_per_token();
  if (request.prompt_case() != v1::GenerateRequest::kText || bytes_per_token == 0) {
    return absl::OkStatus();
  }
  size_t max_prompt_tokens = static_cast<size_t>(std::max(0, path.limits->max_context - 1));
  if (path.ops_limits->max_prompt_tokens > 0) {
    max_prompt_tokens =
        std::min(max_prompt_tokens, static_cast<size_t>(path.ops_limits->max_prompt_tokens));
  }
  const size_t num_bytes = request.text().size();
  const size_t min_tokens = 1 + (num_bytes + bytes_per_token - 1) / bytes_per_token;
  if (min_tokens <= max_prompt_tokens) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "text is ", num_bytes, " bytes, at least ", min_tokens, " tokens (no token spans more than ",
      bytes_per_token, " bytes); a prompt may have at most ", max_prompt_tokens,
      " (context length ", path.limits->max_context, ", prompt + output)"));
}

absl::StatusOr<GenerationRequest> Build(const SubmitPath& path, const v1::GenerateRequest& request,
                                        std::string id) {
  if (absl::Status s = CheckTextLength(request, path); !s.ok()) return s;
  return BuildGenerationRequest(request, std::move(id), *path.tokenizer, *path.limits);
}

}  // namespace

size_t PromptBytes(const v1::GenerateRequest& request) {
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText: return request.text().size();
    case v1::GenerateRequest::kChat: return request.chat().ByteSizeLong();
    default: return 0;
  }
}

void TrimAfterLargePrompt(size_t bytes) {
  if (bytes >= kTrimAfterPromptBytes) malloc_trim(0);
}

absl::Status RegisterCall(const SubmitPath& path, const std::string& id) {
  if (path.calls->Add(id)) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat("request_id '", id, "' is already in flight"));
}

absl::StatusOr<GenerationRequest> PrepareGeneration(const SubmitPath& path,
                                                    const v1::GenerateRequest& request,
                                                    std::string id) {
  absl::StatusOr<GenerationRequest> built = Build(path, request, std::move(id));
  TrimAfterLargePrompt(PromptBytes(request));
  return built;
}

}  // namespace gemma::server
