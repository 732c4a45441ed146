#include "server/http/http_session.h"

#include <sys/socket.h>

#include <cerrno>

#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/http/api_error.h"

namespace gemma::server::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

template <class Stream>
class Session final : public HttpExchange, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  template <class... Args>
  Session(const SessionOptions& options, const RequestHandler* handler, Args&&... args)
      : stream_(std::forward<Args>(args)...), options_(options), handler_(handler) {}
  ~Session() override { EndExchange(); }  // a session destroyed mid-reply is not waited for by Stop

  void Run() {
    if constexpr (kTls) {
      Lowest().expires_after(std::chrono::seconds(options_.idle_timeout_s));
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->Close();
                                self->ReadRequest();
                              });
    } else {
      ReadRequest();
    }
  }

  asio::any_io_executor executor() override { return stream_.get_executor(); }

  void Respond(int status, std::string content_type, std::string body) override {
    if (!in_exchange_ || closed_) return;
    auto response = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(status), 11);
    response->set(bhttp::field::server, "gemma-serve");
    response->set(bhttp::field::content_type, content_type);
    response->keep_alive(keep_alive_);
    response->body() = std::move(body);
    response->prepare_payload();
    bhttp::async_write(stream_, *response,
                       [self = this->shared_from_this(), response](beast::error_code ec, size_t) {
                         self->OnReplyWritten(ec);
                       });
  }

  void StartEvents() override {
    pending_ = absl::StrFormat(
        "HTTP/1.1 200 OK\r\nServer: gemma-serve\r\nContent-Type: text/event-stream\r\n"
        "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: %s\r\n\r\n",
        keep_alive_ ? "keep-alive" : "close");
    Flush();
  }

  void SendEvent(std::string data) override {
    if (data.empty()) return;
    absl::StrAppendFormat(&pending_, "%x\r\n", data.size());
    pending_ += data;
    pending_ += "\r\n";
    Flush();
  }

  void EndEvents() override {
    pending_ += "0\r\n\r\n";
    end_after_flush_ = true;
    Flush();
  }

  void OnClientGone(std::function<void()> callback) override { on_gone_ = std::move(callback); }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void ReadRequest() {
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    Lowest().expires_after(std::chrono::seconds(options_.idle_timeout_s));
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        self->OnRequest(ec);
                      });
  }

  void OnRequest(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) {
      BeginExchange();
      keep_alive_ = false;
      linger_ = true;  // the client is still sending its body
      const ApiError error{413, absl::StrFormat("the request body is larger than %d bytes",
                                                options_.max_body_bytes), ""};
      return Respond(413, "application/json", error.Body());
    }
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
      // A request the parser refused (its line, a header, the framing): the
      // reply says why, then the connection closes (what follows is unframed).
      BeginExchange();
      keep_alive_ = false;
      linger_ = true;
      const bool headers = ec == bhttp::error::header_limit;
      const ApiError error{headers ? 431 : 400,
                           absl::StrCat(headers ? "the request headers are too large" : "malformed HTTP request",
                                        " (", ec.message(), ")"),
                           ""};
      return Respond(error.http_status, "application/json", error.Body());
    }
    if (ec) return Close();
    Lowest().expires_never();
    Request request = parser_->release();
    keep_alive_ = request.keep_alive();
    BeginExchange();
    ++exchange_seq_;
    (*handler_)(std::move(request), this->shared_from_this());
    if (in_exchange_) WatchForClose();
  }

  // A plain socket that turns readable with no bytes means the client shut
  // down its side: it has gone. (Bytes mean a pipelined request: the client
  // is there.) TLS records cannot be told apart so cheaply; a TLS client's
  // absence shows at the next write.
  void WatchForClose() {
    if constexpr (!kTls) {
      Lowest().socket().async_wait(
          tcp::socket::wait_read,
          [self = this->shared_from_this(), seq = exchange_seq_](beast::error_code ec) {
            if (ec || seq != self->exchange_seq_ || !self->in_exchange_) return;
            // A peek tells the cases apart: 0 bytes is the client's EOF; no
            // data yet is a spurious wake-up (watch again); bytes are a
            // pipelined request (the client is there).
            char byte = 0;
            const ssize_t n = ::recv(self->Lowest().socket().native_handle(), &byte, 1,
                                     MSG_PEEK | MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
              self->ClientGone();
            } else if (n < 0) {
              self->WatchForClose();
            }
          });
    }
  }

  void ClientGone() {
    if (closed_) return;
    if (on_gone_) std::exchange(on_gone_, nullptr)();
    Close();
  }

  void Flush() {
    if (writing_ || closed_ || pending_.empty()) return;
    in_flight_.swap(pending_);
    pending_.clear();
    writing_ = true;
    asio::async_write(stream_, asio::buffer(in_flight_),
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        self->OnStreamWritten(ec);
                      });
  }

  void OnStreamWritten(beast::error_code ec) {
    writing_ = false;
    if (ec) return ClientGone();
    if (!pending_.empty()) return Flush();
    if (end_after_flush_) OnReplyWritten(ec);
  }

  void OnReplyWritten(beast::error_code ec) {
    EndExchange();
    end_after_flush_ = false;
    on_gone_ = nullptr;
    if (!ec && linger_) return LingerThenClose();
    if (ec || !keep_alive_) return Close();
    if constexpr (!kTls) {
      // Ends the close watch, which must not outlive its exchange.
      beast::error_code ignored;
      Lowest().socket().cancel(ignored);
    }
    ReadRequest();
  }

  // Closing a socket that still has unread bytes resets the connection, and
  // the client may lose the reply it has not read yet (a 413 sent while the
  // body is still coming). So: stop sending, read and drop what arrives for
  // at most kLingerTime, then close.
  void LingerThenClose() {
    if constexpr (kTls) {
      Close();
    } else {
      constexpr std::chrono::seconds kLingerTime{2};
      beast::error_code ignored;
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      Lowest().expires_after(kLingerTime);
      DrainSome();
    }
  }

  void DrainSome() {
    if constexpr (!kTls) {
      drain_.resize(16384);
      Lowest().async_read_some(boost::asio::buffer(drain_),
                               [self = this->shared_from_this()](beast::error_code ec, size_t) {
                                 if (ec) return self->Close();
                                 self->DrainSome();
                               });
    }
  }

  void BeginExchange() {
    if (in_exchange_) return;
    in_exchange_ = true;
    if (options_.open_exchanges != nullptr) options_.open_exchanges->fetch_add(1);
  }

  void EndExchange() {
    if (!in_exchange_) return;
    in_exchange_ = false;
    if (options_.open_exchanges != nullptr) options_.open_exchanges->fetch_sub(1);
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    EndExchange();  // no reply can be written any more
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

  Stream stream_;
  const SessionOptions options_;
  const RequestHandler* const handler_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool keep_alive_ = true;
  bool linger_ = false;      // drain the client's bytes before closing
  std::vector<char> drain_;  // where drained bytes go
  bool in_exchange_ = false;
  uint64_t exchange_seq_ = 0;
  bool closed_ = false;
  std::function<void()> on_gone_;
  // Event stream state.
  std::string pending_;
  std::string in_flight_;
  bool writing_ = false;
  bool end_after_flush_ = false;
};

}  // namespace

void StartPlainSession(tcp::socket socket, const SessionOptions& options,
                       const RequestHandler* handler) {
  std::make_shared<Session<PlainStream>>(options, handler, std::move(socket))->Run();
}

void StartTlsSession(tcp::socket socket, asio::ssl::context* tls, const SessionOptions& options,
                     const RequestHandler* handler) {
  std::make_shared<Session<TlsStream>>(options, handler, std::move(socket), *tls)->Run();
}

}  // namespace gemma::server::http
