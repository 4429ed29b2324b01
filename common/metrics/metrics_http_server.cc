#include "common/metrics/metrics_http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/host_port.h"
#include "common/base/io_thread.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

std::string Response(absl::string_view status, absl::string_view content_type,
                     absl::string_view body, absl::string_view extra_headers = "") {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\n", extra_headers,
                      "Connection: close\r\n\r\n", body);
}

std::string TextResponse(absl::string_view status, absl::string_view extra_headers = "") {
  return Response(status, "text/plain; charset=utf-8", absl::StrCat(status, "\n"), extra_headers);
}

// One connection: read the request head (bounded in size and time), write
// the response, close. Owned by the handlers in flight (shared_ptr).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, const MetricsRegistry* registry,
             const MetricsHttpServerOptions& options)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        registry_(registry),
        max_bytes_(options.max_request_bytes),
        timeout_(absl::ToChronoMilliseconds(options.read_timeout)) {}

  void Start() {
    auto self = shared_from_this();
    timer_.expires_after(timeout_);
    // Bounds the whole exchange: a client that sends slowly, reads slowly
    // or never closes loses its connection after the read timeout.
    timer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec) self->Close();
    });
    asio::async_read_until(
        socket_, asio::dynamic_buffer(request_, max_bytes_), "\r\n\r\n",
        [self](const boost::system::error_code& ec, size_t n) { self->OnRead(ec, n); });
  }

 private:
  void OnRead(const boost::system::error_code& ec, size_t n) {
    if (ec == asio::error::not_found) {
      // The buffer hit max_bytes_ without the end of the headers.
      Write(TextResponse("431 Request Header Fields Too Large"));
      return;
    }
    if (ec) {
      Close();
      return;
    }
    Write(MetricsHttpResponse(absl::string_view(request_).substr(0, n), *registry_));
  }

  void Write(std::string response) {
    response_ = std::move(response);
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(response_),
                      [self](const boost::system::error_code& ec, size_t) {
                        if (ec) {
                          self->Close();
                          return;
                        }
                        // Closing with request bytes still unread (an
                        // oversized request) would reset the connection and
                        // could destroy the response in flight; so half-close
                        // and discard input until the client closes (bounded
                        // by the timer).
                        boost::system::error_code ignored;
                        self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
                        self->Discard();
                      });
  }

  void Discard() {
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(discard_),
                            [self](const boost::system::error_code& ec, size_t) {
                              if (ec) {
                                self->Close();
                              } else {
                                self->Discard();
                              }
                            });
  }

  void Close() {
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  const MetricsRegistry* registry_;
  const size_t max_bytes_;
  const std::chrono::milliseconds timeout_;
  std::string request_;
  std::string response_;
  char discard_[1024];
};

}  // namespace

absl::Status ValidateMetricsPort(int metrics_port) {
  if (metrics_port < kAnyMetricsPort || metrics_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_port=", metrics_port, " must be -1 (any free port), 0 (off) or a port"));
  }
  return absl::OkStatus();
}

std::string MetricsListenAddress(int metrics_port) {
  return absl::StrCat("0.0.0.0:", metrics_port == kAnyMetricsPort ? 0 : metrics_port);
}

std::string MetricsHttpResponse(absl::string_view request_head, const MetricsRegistry& registry) {
  const absl::string_view line = request_head.substr(0, request_head.find("\r\n"));
  const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.") || parts[1].empty() ||
      parts[1][0] != '/') {
    return TextResponse("400 Bad Request");
  }
  const absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  if (path != "/metrics") return TextResponse("404 Not Found");
  const bool head = parts[0] == "HEAD";
  if (parts[0] != "GET" && !head) {
    return TextResponse("405 Method Not Allowed", "Allow: GET, HEAD\r\n");
  }
  std::string response =
      Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", registry.Expose());
  // HEAD: the headers GET would send (Content-Length included), no body.
  if (head) response.resize(response.find("\r\n\r\n") + 4);
  return response;
}

class MetricsHttpServer::Impl {
 public:
  Impl(const MetricsHttpServerOptions& options, const MetricsRegistry* registry)
      : options_(options), registry_(registry), io_("metrics-http"), acceptor_(io_.context()) {}

  ~Impl() {
    io_.RunSync([this] {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
    });
    // Connections still open are destroyed (closed) with the queued handlers.
    io_.Stop();
  }

  absl::Status Listen() {
    absl::StatusOr<HostPort> hp = ParseHostPort(options_.listen_address);
    if (!hp.ok()) return hp.status();
    boost::system::error_code ec;
    const asio::ip::address address =
        asio::ip::make_address(hp->host.empty() ? "0.0.0.0" : hp->host, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics listen address \"", options_.listen_address, "\": ", ec.message()));
    }
    const tcp::endpoint endpoint(address, hp->port);
    io_.RunSync([&] {
      acceptor_.open(endpoint.protocol(), ec);
      if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
      if (!ec) acceptor_.bind(endpoint, ec);
      if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
      if (!ec) port_ = acceptor_.local_endpoint().port();
      if (!ec) Accept();
    });
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("metrics server on ", options_.listen_address, ": ", ec.message()));
    }
    return absl::OkStatus();
  }

  int port() const { return port_; }

 private:
  void Accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) std::make_shared<Connection>(std::move(socket), registry_, options_)->Start();
      Accept();
    });
  }

  const MetricsHttpServerOptions options_;
  const MetricsRegistry* const registry_;
  IoThread io_;
  tcp::acceptor acceptor_;
  int port_ = 0;
};

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsHttpServer::~MetricsHttpServer() = default;

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const MetricsHttpServerOptions& options, const MetricsRegistry* registry) {
  auto impl = std::make_unique<Impl>(options, registry);
  if (absl::Status s = impl->Listen(); !s.ok()) return s;
  LOG(INFO) << "metrics on http://"
            << options.listen_address.substr(0, options.listen_address.rfind(':')) << ":"
            << impl->port() << "/metrics";
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(impl)));
}

int MetricsHttpServer::port() const { return impl_->port(); }

}  // namespace pdserve
