#include "server/http/generation_call.h"

#include <utility>

#include <boost/asio/post.hpp>

#include "absl/strings/str_cat.h"
#include "server/http/api_error.h"
#include "spdlog/spdlog.h"

namespace gemma::server::http {

using Json = nlohmann::json;

GenerationCall::GenerationCall(const SubmitPath& path, ResponseHeader header,
                               OpenAiRequest request, std::shared_ptr<HttpExchange> exchange)
    : path_(path),
      header_(std::move(header)),
      request_(std::move(request)),
      exchange_(std::move(exchange)) {}

void GenerationCall::Start(const SubmitPath& path, ResponseHeader header, OpenAiRequest request,
                           std::shared_ptr<HttpExchange> exchange) {
  std::shared_ptr<GenerationCall> call(
      new GenerationCall(path, std::move(header), std::move(request), std::move(exchange)));
  const OpenAiRequest& r = call->request_;
  // More sequences than the engine ever holds waiting: no retry could run it.
  const int64_t sequences = static_cast<int64_t>(r.prompts.size()) * r.n;
  if (path.limits != nullptr && path.limits->max_queue > 0 && sequences > path.limits->max_queue) {
    const ApiError error = BadRequest(
        absl::StrCat("n asks for ", sequences, " sequences (", r.n, " for each of ", r.prompts.size(),
                     " prompts), more than the server queues at once (", path.limits->max_queue, ", --max-queue)"),
        "n");
    call->exchange_->Respond(error.http_status, "application/json", error.Body());
    return;
  }
  for (size_t p = 0; p < r.prompts.size(); ++p) {
    for (int j = 0; j < r.n; ++j) {
      const int index = static_cast<int>(p) * r.n + j;
      call->slots_.push_back(Slot{absl::StrCat(call->header_.id, "-", index), static_cast<int>(p)});
      call->choices_.emplace_back(&call->header_, index, r.echo ? r.prompt_texts[p] : "");
    }
  }
  // Registered before they are queued: a drain waits for queued calls too.
  absl::Status status;
  size_t registered = 0;
  for (; registered < call->slots_.size() && status.ok(); ++registered) {
    status = RegisterCall(path, call->slots_[registered].engine_id);
  }
  if (status.ok()) {
    size_t bytes = 0;
    for (const v1::GenerateRequest& prompt : r.prompts) bytes += PromptBytes(prompt);
    status = path.pool->Post(bytes * r.n, [call](bool run) { call->Prepare(run); });
  } else {
    --registered;  // the one that failed
  }
  if (!status.ok()) {
    for (size_t i = 0; i < registered; ++i) path.calls->Remove(call->slots_[i].engine_id);
    const ApiError error = FromStatus(status);
    spdlog::info("request {} rejected: {}", call->header_.id, error.message);
    call->exchange_->Respond(error.http_status, "application/json", error.Body());
    return;
  }
  std::weak_ptr<GenerationCall> weak = call;
  call->exchange_->OnClientGone([weak] {
    if (std::shared_ptr<GenerationCall> self = weak.lock()) self->OnClientGone();
  });
}

void GenerationCall::Prepare(bool run) {
  absl::StatusOr<std::vector<GenerationRequest>> result = std::vector<GenerationRequest>();
  if (!run) result = absl::UnavailableError("the server is shutting down");
  const OpenAiRequest& r = request_;
  for (size_t i = 0; i < slots_.size() && result.ok(); ++i) {
    // A client that left while this waited gets nothing built.
    if (client_gone_.load(std::memory_order_acquire)) {
      result = absl::CancelledError("the client went away");
      break;
    }
    const int j = static_cast<int>(i) % r.n;
    // n samples of one seeded request differ, but repeat run to run.
    v1::GenerateRequest proto = r.prompts[slots_[i].prompt_index];
    if (j > 0 && proto.sampling().has_seed()) {
      proto.mutable_sampling()->set_seed(proto.sampling().seed() + static_cast<uint64_t>(j));
    }
    absl::StatusOr<GenerationRequest> one = PrepareGeneration(path_, proto, slots_[i].engine_id);
    if (!one.ok()) {
      result = one.status();
      break;
    }
    result->push_back(*std::move(one));
  }
  boost::asio::post(exchange_->executor(),
                    [self = shared_from_this(), result = std::move(result)]() mutable {
                      self->OnPrepared(std::move(result));
                    });
}

void GenerationCall::OnPrepared(absl::StatusOr<std::vector<GenerationRequest>> built) {
  if (replied_) {  // the client went away
    Unregister();
    return;
  }
  if (!built.ok()) {
    Unregister();
    replied_ = true;
    const ApiError error = FromStatus(built.status());
    spdlog::info("request {} rejected: {}", header_.id, error.message);
    exchange_->Respond(error.http_status, "application/json", error.Body());
    return;
  }
  Submit(*std::move(built));
}

void GenerationCall::Unregister() {
  for (Slot& slot : slots_) {
    slot.done = true;
    path_.calls->Remove(slot.engine_id);
  }
}

void GenerationCall::Submit(std::vector<GenerationRequest> requests) {
  boost::asio::any_io_executor strand = exchange_->executor();
  for (size_t i = 0; i < requests.size(); ++i) {
    std::shared_ptr<GenerationCall> self = shared_from_this();
    const int index = static_cast<int>(i);
    absl::Status submitted = path_.engine->Submit(
        std::move(requests[i]), [self, index, strand](GenerationEvent&& event) {
          boost::asio::post(strand, [self, index, event = std::move(event)]() mutable {
            self->OnEvent(index, std::move(event));
          });
        });
    if (submitted.ok()) {
      slots_[i].submitted = true;
      continue;
    }
    // The rest never reach the engine.
    for (size_t k = i; k < slots_.size(); ++k) {
      slots_[k].done = true;
      path_.calls->Remove(slots_[k].engine_id);
    }
    Fail(submitted);
    return;
  }
  if (request_.stream) {
    exchange_->StartEvents();
    stream_started_ = true;
  }
}

void GenerationCall::OnEvent(int index, GenerationEvent event) {
  Slot& slot = slots_[index];
  if (event.finished) {
    slot.done = true;
    path_.calls->Remove(slot.engine_id);
  }
  if (replied_) return;
  if (event.finished && !event.error.ok()) {
    Fail(event.error);
    return;
  }
  if (request_.stream) {
    std::string chunk = choices_[index].Chunk(event, request_.include_usage);
    if (!chunk.empty()) exchange_->SendEvent(std::move(chunk));
  } else {
    choices_[index].Add(event);
  }
  MaybeFinish();
}

void GenerationCall::OnClientGone() {
  client_gone_.store(true, std::memory_order_release);
  if (replied_) return;
  replied_ = true;
  spdlog::info("request {} cancelled: the client went away", header_.id);
  CancelAll();
}

void GenerationCall::CancelAll() {
  for (const Slot& slot : slots_) {
    if (slot.submitted && !slot.done) path_.engine->Cancel(slot.engine_id);
  }
}

void GenerationCall::Fail(const absl::Status& status) {
  if (replied_) return;
  replied_ = true;
  CancelAll();
  const ApiError error = FromStatus(status);
  spdlog::info("request {} failed: {}", header_.id, error.message);
  if (!stream_started_) {
    exchange_->Respond(error.http_status, "application/json", error.Body());
    return;
  }
  exchange_->SendEvent("data: " + error.Body() + "\n\ndata: [DONE]\n\n");
  exchange_->EndEvents();
}

Json GenerationCall::TotalUsage() const {
  int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Usage& u = choices_[i].usage();
    completion_tokens += u.completion_tokens;
    // The prompt counts once per prompt, whatever n is (as vLLM counts).
    if (i % request_.n == 0) {
      prompt_tokens += u.prompt_tokens;
      cached_tokens += u.cached_tokens;
    }
  }
  return UsageJson(prompt_tokens, completion_tokens, cached_tokens);
}

void GenerationCall::MaybeFinish() {
  for (const Slot& slot : slots_) {
    if (!slot.done) return;
  }
  replied_ = true;
  const Json usage = TotalUsage();
  spdlog::info("request {} tokens_in={} tokens_out={} choices={} stream={}", header_.id,
               usage["prompt_tokens"].get<int>(), usage["completion_tokens"].get<int>(),
               choices_.size(), request_.stream);
  if (request_.stream) {
    std::string tail;
    if (request_.include_usage) {
      Json chunk = ChunkEnvelope(header_);
      chunk["choices"] = Json::array();
      chunk["usage"] = usage;
      tail = SseData(chunk);
    }
    exchange_->SendEvent(tail + "data: [DONE]\n\n");
    exchange_->EndEvents();
    return;
  }
  const bool chat = header_.endpoint == Endpoint::kChat;
  Json body = {{"id", header_.id},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", header_.created},
               {"model", header_.model},
               {"choices", Json::array()}};
  for (const Choice& choice : choices_) body["choices"].push_back(choice.ToJson());
  body["usage"] = usage;
  exchange_->Respond(200, "application/json", DumpJson(body));
}

}  // namespace gemma::server::http
