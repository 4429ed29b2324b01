// HttpServer: HTTP/1.1 on Boost.Beast over its own IoThread, for the
// router's and the workers' HTTP endpoints (/metrics; later the OpenAI
// API). Beast parses and frames; the server bounds what a client can hold:
// the read timeout closes a client that does not send a complete request in
// time (a trickler, or an idle keep-alive connection), header blocks over
// max_header_bytes get 431 and bodies over max_body_bytes 413. Persistent
// connections are kept unless the client (or the handler, with
// "Connection: close") asks otherwise.
//
// Each request goes to the handler on the I/O thread; it answers through
// the HttpResponder, from any thread (see http_responder.h).
//
// Thread-safety: Start(), port() and the destructor from any one thread.
// The destructor stops accepting, closes every connection (running the
// on-close of each response in flight) and joins the I/O thread; responders
// still held elsewhere then drop their calls.
#ifndef PDSERVE_COMMON_HTTP_HTTP_SERVER_H_
#define PDSERVE_COMMON_HTTP_HTTP_SERVER_H_

#include <boost/asio/ip/tcp.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/io_thread.h"
#include "common/http/http_connection.h"
#include "common/http/http_handler.h"
#include "common/http/http_request.h"
#include "common/http/http_responder.h"
#include "common/tls/reloading_tls_context.h"

namespace pdserve {

struct HttpServerOptions {
  // "host:port"; port 0 picks a free port.
  std::string listen_address = "0.0.0.0:0";
  // For each request, from the end of the last response (or the connect)
  // to the end of its body.
  absl::Duration read_timeout = absl::Seconds(30);
  // Request line plus header fields.
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;
  // A streamed response's socket send buffer (0: the kernel's autotuning,
  // which lets a client that does not read park megabytes in the kernel
  // while the producer goes on). Small, so a stream's writes stall soon
  // and its producer feels the back pressure; ample for token streams.
  int stream_send_buffer_bytes = 32 * 1024;
  // Unset: "<status> <reason>" as plain text.
  HttpErrorBody error_body;
  // HTTPS when set (common/tls/reloading_tls_context.h: reloaded as its
  // files change); the handshake counts against read_timeout.
  std::shared_ptr<ReloadingTlsContext> tls;
  // The I/O thread's name (at most 15 characters) in debuggers and top.
  std::string thread_name = "http";
};

class HttpServer {
 public:
  // Listens and starts serving; INVALID_ARGUMENT for a bad address,
  // UNAVAILABLE when it cannot listen there.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port listened on (the chosen one when the address said 0).
  int port() const { return port_; }

 private:
  HttpServer(const HttpServerOptions& options, HttpHandler handler);
  absl::Status Listen();
  void Accept();

  const HttpServerOptions options_;
  const HttpHandler handler_;
  HttpConnection::Config config_;
  // I/O thread only. Declared before io_ so it outlives the handlers the
  // io_context destroys.
  std::unordered_map<uint64_t, std::weak_ptr<HttpConnection>> connections_;
  uint64_t next_connection_id_ = 0;
  std::shared_ptr<HttpPostGate> gate_;
  IoThread io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  int port_ = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_HTTP_HTTP_SERVER_H_
