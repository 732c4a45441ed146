// One /v1/chat/completions or /v1/completions request in flight: its n x
// prompts engine requests (each prepared and submitted through the path the
// gRPC front uses), their events gathered on the connection's strand into
// one response or one SSE stream, and their cancellation when the client
// goes away (the engine frees their KV blocks within a step).
//
// Lifetime: shared by the engine callbacks and the exchange's callbacks; it
// ends after the last engine request's final event.
//
// Thread-safety: engine events arrive on the engine thread and are posted to
// the exchange's strand; all state is touched only there.
#pragma once

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
  // Prepares every engine request (a bad field answers 400 and submits
  // nothing), then submits them. Call on the exchange's strand.
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
};

}  // namespace gemma::server::http
