#include "common/http/http_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "common/http/http_post_gate.h"
#include "glog/logging.h"

namespace pdserve {

namespace asio = boost::asio;
using asio::ip::tcp;

HttpServer::HttpServer(const HttpServerOptions& options, HttpHandler handler)
    : options_(options),
      handler_(std::move(handler)),
      io_(options.thread_name),
      acceptor_(io_.context()) {
  gate_ = std::make_shared<HttpPostGate>(&io_.context());
  config_.max_header_bytes = options_.max_header_bytes;
  config_.max_body_bytes = options_.max_body_bytes;
  config_.read_timeout = absl::ToChronoMilliseconds(options_.read_timeout);
  config_.stream_send_buffer_bytes = options_.stream_send_buffer_bytes;
  config_.handler = &handler_;
  config_.error_body = options_.error_body ? &options_.error_body : nullptr;
  config_.tls = options_.tls.get();
  config_.gate = gate_;
  config_.on_closed = [this](uint64_t id) { connections_.erase(id); };
}

HttpServer::~HttpServer() {
  // First no responder reaches the I/O thread any more, then every
  // connection closes there; what is still queued is destroyed by Stop().
  gate_->Close();
  io_.RunSync([this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    // Close() forgets a connection through on_closed: iterate a copy.
    auto connections = std::move(connections_);
    connections_.clear();
    for (auto& [id, weak] : connections) {
      if (std::shared_ptr<HttpConnection> c = weak.lock()) c->Close();
    }
  });
  io_.Stop();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandler handler) {
  std::unique_ptr<HttpServer> server(new HttpServer(options, std::move(handler)));
  if (absl::Status s = server->Listen(); !s.ok()) return s;
  return server;
}

absl::Status HttpServer::Listen() {
  absl::StatusOr<HostPort> hp = ParseHostPort(options_.listen_address);
  if (!hp.ok()) return hp.status();
  boost::system::error_code ec;
  const asio::ip::address address =
      asio::ip::make_address(hp->host.empty() ? "0.0.0.0" : hp->host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP listen address \"", options_.listen_address, "\": ", ec.message()));
  }
  const tcp::endpoint endpoint(address, hp->port);
  io_.RunSync([&] {
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) port_ = acceptor_.local_endpoint(ec).port();
    if (!ec) Accept();
  });
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("HTTP server on ", options_.listen_address, ": ", ec.message()));
  }
  return absl::OkStatus();
}

void HttpServer::Accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      LOG(WARNING) << "HTTP server on port " << port_ << ": accept failed: " << ec.message();
    } else {
      const uint64_t id = next_connection_id_++;
      auto connection = std::make_shared<HttpConnection>(std::move(socket), id, config_);
      connections_[id] = connection;
      connection->Start();
    }
    Accept();
  });
}

}  // namespace pdserve
