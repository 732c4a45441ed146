#include "clients/loadgen/openai_call.h"

#include <chrono>
#include <limits>
#include <optional>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace gemma::loadgen {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double MillisecondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Collects the stream's measurements as its SSE events arrive.
class EventStreamReader {
 public:
  explicit EventStreamReader(Clock::time_point sent) : sent_(sent) {}

  // Appends received body bytes; handles every complete event.
  void Feed(std::string_view bytes, Clock::time_point now) {
    pending_.append(bytes);
    size_t end;
    while ((end = pending_.find("\n\n")) != std::string::npos) {
      OnEvent(std::string_view(pending_).substr(0, end), now);
      pending_.erase(0, end + 2);
    }
  }

  RequestResult Finish(int status_code, Clock::time_point now) {
    RequestResult result;
    result.e2e_ms = MillisecondsBetween(sent_, now);
    result.prompt_tokens = prompt_tokens_;
    const int num_chunks = static_cast<int>(chunk_times_.size());
    result.output_tokens = completion_tokens_.value_or(num_chunks);
    if (num_chunks > 0) result.ttft_ms = MillisecondsBetween(sent_, chunk_times_.front());
    if (num_chunks == result.output_tokens) {
      for (int i = 1; i < num_chunks; ++i) {
        result.itl_ms.push_back(MillisecondsBetween(chunk_times_[i - 1], chunk_times_[i]));
      }
    } else if (num_chunks > 0 && result.output_tokens > 1) {
      const double span = MillisecondsBetween(chunk_times_.front(), chunk_times_.back());
      result.itl_ms.assign(result.output_tokens - 1, span / (result.output_tokens - 1));
    }
    result.ok = status_code == 200 && done_ && error_.empty();
    result.error_code = result.ok ? "OK" : "HTTP_" + std::to_string(status_code);
    if (!error_.empty()) result.error_message = error_;
    if (status_code == 200 && !done_ && error_.empty()) {
      result.error_code = "NO_DONE";
      result.error_message = "the stream ended without data: [DONE]";
    }
    return result;
  }

  // The body of a refused request, for the error message.
  const std::string& unparsed() const { return pending_; }

 private:
  void OnEvent(std::string_view event, Clock::time_point now) {
    constexpr std::string_view kData = "data: ";
    if (event.substr(0, kData.size()) != kData) return;
    event.remove_prefix(kData.size());
    if (event == "[DONE]") {
      done_ = true;
      return;
    }
    const Json chunk = Json::parse(event, nullptr, /*allow_exceptions=*/false);
    if (chunk.is_discarded()) {
      error_ = "a stream event is not JSON";
      return;
    }
    if (chunk.contains("error")) error_ = chunk["error"].dump();
    if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
      prompt_tokens_ = usage->value("prompt_tokens", prompt_tokens_);
      completion_tokens_ = usage->value("completion_tokens", 0);
    }
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) return;
    // Every chunk with a choice carries new tokens (the server sends one per
    // batch of tokens, even when they decode to no text yet); the last one
    // may carry only the finish reason.
    const Json& choice = (*choices)[0];
    const Json& text = choice["text"];
    const bool has_text = text.is_string() && !text.get_ref<const std::string&>().empty();
    if (has_text || choice.value("finish_reason", Json()).is_null()) chunk_times_.push_back(now);
  }

  const Clock::time_point sent_;
  std::string pending_;
  std::vector<Clock::time_point> chunk_times_;
  std::optional<int> completion_tokens_;
  int prompt_tokens_ = 0;
  bool done_ = false;
  std::string error_;
};

RequestResult Failed(const std::string& code, const std::string& message) {
  RequestResult result;
  result.error_code = code;
  result.error_message = message;
  return result;
}

}  // namespace

bool SplitHostPort(const std::string& addr, std::string* host, std::string* port) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon + 1 == addr.size()) return false;
  *host = addr.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  *port = addr.substr(colon + 1);
  return true;
}

Json MakeCompletionBody(const RequestSpec& spec, const CallSettings& settings, int index) {
  Json body = {{"max_tokens", spec.max_tokens},
               {"ignore_eos", settings.ignore_eos},
               {"temperature", settings.temperature},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (spec.prompt_ids.empty()) {
    body["prompt"] = spec.prompt_text;
  } else {
    body["prompt"] = spec.prompt_ids;
  }
  if (settings.temperature > 0) body["seed"] = settings.seed + index;
  return body;
}

RequestResult RunCompletion(const std::string& http_addr, const RequestSpec& spec,
                            const CallSettings& settings, int index) {
  std::string host, port;
  if (!SplitHostPort(http_addr, &host, &port)) return Failed("BAD_ADDRESS", http_addr);
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  beast::error_code ec;
  const auto endpoints = tcp::resolver(io).resolve(host, port, ec);
  if (!ec) stream.connect(endpoints, ec);
  if (ec) return Failed("UNAVAILABLE", "connect " + http_addr + ": " + ec.message());
  stream.expires_after(std::chrono::microseconds(static_cast<int64_t>(settings.timeout_s * 1e6)));

  http::request<http::string_body> request(http::verb::post, "/v1/completions", 11);
  request.set(http::field::host, host);
  request.set(http::field::content_type, "application/json");
  request.set(http::field::accept, "text/event-stream");
  if (!settings.api_key.empty()) request.set(http::field::authorization, "Bearer " + settings.api_key);
  request.body() = MakeCompletionBody(spec, settings, index).dump();
  request.prepare_payload();

  const Clock::time_point sent = Clock::now();
  http::write(stream, request, ec);
  if (ec) return Failed("UNAVAILABLE", "write: " + ec.message());
  EventStreamReader reader(sent);
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(stream, buffer, parser, ec);
  char bytes[16384];
  while (!ec && !parser.is_done()) {
    parser.get().body().data = bytes;
    parser.get().body().size = sizeof(bytes);
    // read_some: hand each event over as it arrives (read() would wait for
    // the whole 16 KiB buffer, batching the chunk times).
    http::read_some(stream, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    reader.Feed(std::string_view(bytes, sizeof(bytes) - parser.get().body().size), Clock::now());
  }
  const int status_code = parser.is_header_done() ? parser.get().result_int() : 0;
  RequestResult result = reader.Finish(status_code, Clock::now());
  if (ec && ec != http::error::end_of_stream) {
    result.ok = false;
    result.error_code = ec == beast::error::timeout ? "DEADLINE_EXCEEDED" : "UNAVAILABLE";
    result.error_message = ec.message();
  } else if (status_code != 200) {
    result.error_message = reader.unparsed().substr(0, 500);
  }
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return result;
}

}  // namespace gemma::loadgen
