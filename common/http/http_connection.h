// HttpConnection: one accepted socket of an HttpServer. Reads requests with
// Beast's parser (bounded header and body sizes; the read timeout bounds
// the wait for each request), hands each to the handler with a responder,
// writes the response the responder sends (whole, or as a chunked stream)
// and then either reads the next request (keep-alive) or closes.
//
// While a response is in flight it keeps one read posted so that a client
// that disconnects is noticed at once (the responder's on-close), and so a
// pipelined next request is buffered rather than lost.
//
// Errors it answers itself: 400 (malformed), 413 (body over the limit), 431
// (header block over the limit), 500 (the handler dropped its responder);
// each closes the connection after the response, and each logs one line
// with the peer.
//
// Thread-safety: everything runs on the server's I/O thread (a single
// thread, so it needs no strand); responders reach it through
// HttpPostGate. Owned by its pending operations (shared_ptr); the server
// keeps a weak_ptr to close it on shutdown.
#ifndef PDSERVE_COMMON_HTTP_HTTP_CONNECTION_H_
#define PDSERVE_COMMON_HTTP_HTTP_CONNECTION_H_

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/http/http_handler.h"
#include "common/http/http_request.h"
#include "common/http/http_stream.h"
#include "common/tls/reloading_tls_context.h"

namespace pdserve {

class HttpPostGate;
class HttpResponder;

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  struct Config {
    size_t max_header_bytes = 0;
    size_t max_body_bytes = 0;
    std::chrono::milliseconds read_timeout{0};
    int stream_send_buffer_bytes = 0;           // 0: kernel default
    const HttpHandler* handler = nullptr;       // outlives the connection's I/O
    const HttpErrorBody* error_body = nullptr;  // the same; null = plain text
    ReloadingTlsContext* tls = nullptr;         // the same; null = plaintext
    std::shared_ptr<HttpPostGate> gate;
    std::function<void(uint64_t id)> on_closed;  // the server forgets it
  };

  HttpConnection(boost::asio::ip::tcp::socket socket, uint64_t id, const Config& config);
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Starts reading the first request.
  void Start();
  // Closes the socket now; a response in flight is cut off and its
  // responder's on-close runs. Idempotent.
  void Close();

  // What responders post. `sequence` names the request being answered; a
  // call for any other (a stale responder) is ignored.
  void SendResponse(uint64_t sequence, int status, std::string content_type, std::string body,
                    HttpHeaderList headers);
  void SendStreamHead(uint64_t sequence, int status, std::string content_type,
                      HttpHeaderList headers);
  // `on_written` (may be null) runs once the chunk is in the socket.
  void SendChunk(uint64_t sequence, std::string chunk, std::function<void()> on_written);
  void SendStreamEnd(uint64_t sequence);
  // A text/plain error response that closes the connection after it.
  void SendError(uint64_t sequence, int status);
  // Cuts a stream off (its responder was dropped).
  void Abort(uint64_t sequence);

 private:
  enum class Phase { kAwaitRequest, kResponding, kDraining, kClosed };
  using WriteDone = std::function<void(const boost::system::error_code&)>;
  // One queued write: starts an async write and calls done when it ends.
  using WriteOp = std::function<void(WriteDone done)>;

  void AwaitRequest();
  void ReadRequest();
  void OnRead(const boost::system::error_code& ec);
  void Watch();
  void OnWatch(const boost::system::error_code& ec, size_t n);
  void ArmTimer();
  // Writes op after those queued; `last` ends the response.
  void Enqueue(WriteOp op, bool last);
  void WriteNext();
  void ResponseWritten();
  bool Current(uint64_t sequence) const;

  // The TLS context this connection was made with (ReloadingTlsContext may
  // move on to a renewed one); null for plaintext. Declared before the
  // stream on it.
  std::shared_ptr<boost::asio::ssl::context> tls_context_;
  HttpStream stream_;
  boost::asio::steady_timer timer_;
  const uint64_t id_;
  const Config& config_;
  std::string peer_;

  Phase phase_ = Phase::kAwaitRequest;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool watching_ = false;  // a read_some into buffer_ is pending
  uint64_t timer_generation_ = 0;

  // The request being answered.
  uint64_t sequence_ = 0;
  std::weak_ptr<HttpResponder> responder_;
  bool keep_alive_ = false;
  bool head_ = false;     // a HEAD request: headers only
  bool chunked_ = false;  // the stream uses chunked encoding (else raw until close)
  bool response_started_ = false;

  std::deque<std::pair<WriteOp, bool>> writes_;
  bool writing_ = false;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_HTTP_HTTP_CONNECTION_H_
