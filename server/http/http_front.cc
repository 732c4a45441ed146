#include "server/http/http_front.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/strand.hpp>

#include "absl/strings/str_cat.h"
#include "server/http/openai_api.h"
#include "spdlog/spdlog.h"

namespace gemma::server::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// How long Stop waits for replies under way.
constexpr std::chrono::seconds kReplyFlush{5};

struct HttpFront::Impl {
  explicit Impl(const HttpFrontOptions& options)
      : options(options),
        api(options.api_keys, options.served_model_name),
        acceptor(asio::make_strand(io)),
        handler([this](Request&& request, std::shared_ptr<HttpExchange> exchange) {
          api.Handle(std::move(request), std::move(exchange));
        }) {
    this->options.session.open_exchanges = &open_exchanges;
  }

  absl::Status Listen();
  absl::Status SetUpTls();
  void Accept();

  // Replies under way across all sessions (each session's
  // SessionOptions::open_exchanges points here); Stop waits, up to its
  // deadline, for it to reach 0.
  std::atomic<int> open_exchanges{0};
  HttpFrontOptions options;
  OpenAiApi api;
  // Before io: the sessions destroyed with io's handlers use it.
  std::unique_ptr<asio::ssl::context> tls;
  asio::io_context io;
  tcp::acceptor acceptor;
  const RequestHandler handler;
  std::vector<std::thread> threads;
  bool stopped = false;
};

absl::Status HttpFront::Impl::SetUpTls() {
  if (!options.tls.enabled()) return absl::OkStatus();
  absl::StatusOr<std::string> cert = ops::ReadPemFile(options.tls.cert_file, "--tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ops::ReadPemFile(options.tls.key_file, "--tls-key");
  if (!key.ok()) return key.status();
  tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  tls->use_certificate_chain(asio::buffer(*cert), ec);
  if (!ec) tls->use_private_key(asio::buffer(*key), asio::ssl::context::pem, ec);
  if (!ec && !options.tls.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ops::ReadPemFile(options.tls.client_ca_file, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
    tls->add_certificate_authority(asio::buffer(*ca), ec);
    tls->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls-cert/--tls-key: ", ec.message()));
  return absl::OkStatus();
}

absl::Status HttpFront::Impl::Listen() {
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(options.host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--host: '", options.host, "' is not an address"));
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("--http-port: cannot listen on ", options.host, ":",
                                               options.port, ": ", ec.message()));
  }
  return absl::OkStatus();
}

void HttpFront::Impl::Accept() {
  acceptor.async_accept(asio::make_strand(io), [this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      if (tls != nullptr) {
        StartTlsSession(std::move(socket), tls.get(), options.session, &handler);
      } else {
        StartPlainSession(std::move(socket), options.session, &handler);
      }
    } else {
      // Out of descriptors, typically: keep accepting, the condition passes.
      spdlog::warn("http: accept failed: {}", ec.message());
    }
    Accept();
  });
}

HttpFront::HttpFront(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpFront>> HttpFront::Start(const HttpFrontOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  if (absl::Status s = impl->SetUpTls(); !s.ok()) return s;
  if (absl::Status s = impl->Listen(); !s.ok()) return s;
  std::unique_ptr<HttpFront> front(new HttpFront(std::move(impl)));
  Impl& i = *front->impl_;
  front->port_ = i.acceptor.local_endpoint().port();
  i.Accept();
  for (int t = 0; t < std::max(1, options.num_threads); ++t) {
    i.threads.emplace_back([&i] { i.io.run(); });
  }
  spdlog::info("OpenAI-compatible API on {}://{}:{}/v1", i.tls ? "https" : "http", options.host,
               front->port_);
  return front;
}

HttpFront::~HttpFront() { Stop(); }

void HttpFront::Attach(GemmaService* service) { impl_->api.Attach(service); }

void HttpFront::StartDraining() { impl_->api.StartDraining(); }

void HttpFront::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  asio::post(impl_->acceptor.get_executor(), [i = impl_.get()] {
    boost::system::error_code ignored;
    i->acceptor.close(ignored);
  });
  // Replies under way (a stream's last chunks, written after its call left
  // the server's active calls) finish first, for a bounded time.
  const auto deadline = std::chrono::steady_clock::now() + kReplyFlush;
  while (impl_->open_exchanges.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Connections still open (idle keep-alive ones) are closed when their
  // handlers are destroyed with the io_context.
  impl_->io.stop();
  for (std::thread& t : impl_->threads) t.join();
}

}  // namespace gemma::server::http
