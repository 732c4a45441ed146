// One /v1/chat/completions or /v1/completions request in flight: its n x
// prompts engine requests (each prepared through the path the gRPC front
// uses, on the PreparePool so that tokenizing never blocks the connection's
// strand, then submitted from the strand), their events gathered on the
// strand into one response or one SSE stream, and their cancellation when
// the client goes away (while queued: nothing is built or submitted; later:
// the engine frees their KV blocks within a step).
//
// Lifetime: shared by the pool task, the engine callbacks and the exchange's
// callbacks; it ends after the last engine request's final event.
//
// Thread-safety: the pool task reads only the immutable request and
// `client_gone_`, and posts its result to the exchange's strand; engine
// events are posted there too; all other state is touched only there.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "server/http/http_exchange.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"
#include "server/submission.h"

namespace gemma::server::http {

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  // Registers every engine request's id and queues their preparation (a full
  // queue answers 429); once prepared, submits them (a bad field answers 400
  // and submits nothing). Call on the exchange's strand.
  static void Start(const SubmitPath& path, ResponseHeader header, OpenAiRequest request,
                    std::shared_ptr<HttpExchange> exchange);

 private:
  struct Slot {
    std::string engine_id;
    int prompt_index = 0;
    bool submitted = false;
    bool done = false;  // its final event arrived (or it was never submitted)
  };

  GenerationCall(const SubmitPath& path, ResponseHeader header, OpenAiRequest request,
                 std::shared_ptr<HttpExchange> exchange);
  // PreparePool worker: builds every engine request, then posts the result
  // to the strand (OnPrepared).
  void Prepare(bool run);
  void OnPrepared(absl::StatusOr<std::vector<GenerationRequest>> built);  // strand
  void Unregister();  // strand; every id, for requests that never reached the engine
  void Submit(std::vector<GenerationRequest> requests);
  void OnEvent(int index, GenerationEvent event);  // strand
  void OnClientGone();
  void Fail(const absl::Status& status);
  void CancelAll();
  void MaybeFinish();
  nlohmann::json TotalUsage() const;

  const SubmitPath path_;
  const ResponseHeader header_;
  const OpenAiRequest request_;
  const std::shared_ptr<HttpExchange> exchange_;
  std::vector<Slot> slots_;
  std::vector<Choice> choices_;
  bool replied_ = false;       // the response (or its stream's end) is out
  bool stream_started_ = false;
  std::atomic<bool> client_gone_{false};  // read by the pool task
};

}  // namespace gemma::server::http
