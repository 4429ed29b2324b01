// HttpResponder: how a handler answers one request, once: either whole
// (Respond) or streamed (StartStream, Write..., Finish; chunked transfer
// encoding on HTTP/1.1). The handler may answer later and from any thread;
// every call is posted to the connection's I/O thread, and calls made in
// order (from one thread, or ordered by the caller) are written in that
// order.
//
// A responder dropped before its response finished is a handler bug: the
// client gets a 500 if nothing was sent yet, or a cut-off stream, and the
// server logs a line. Calls after the server is gone, or after the client
// disconnected, are dropped.
//
// Thread-safety: every method from any thread. The on-close callback runs
// on the server's I/O thread (or in SetOnClose's caller when the client is
// already gone) and must not block.
#ifndef PDSERVE_COMMON_HTTP_HTTP_RESPONDER_H_
#define PDSERVE_COMMON_HTTP_HTTP_RESPONDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/http/http_request.h"

namespace pdserve {

class HttpConnection;
class HttpPostGate;

class HttpResponder {
 public:
  ~HttpResponder();
  HttpResponder(const HttpResponder&) = delete;
  HttpResponder& operator=(const HttpResponder&) = delete;

  // The whole response. `headers` are added as given; "Connection: close"
  // among them closes the connection after the response. Content-Length is
  // set here (for HEAD the length GET would have, with no body).
  void Respond(int status, std::string content_type, std::string body, HttpHeaderList headers = {});

  // A streamed response: the status and headers now, the body in Write()s,
  // ended by Finish(). Empty chunks are skipped (an empty chunk would end
  // the stream).
  void StartStream(int status, std::string content_type, HttpHeaderList headers = {});
  // Queues `chunk`; `on_written` (optional) runs on the I/O thread once the
  // chunk is in the socket — how a producer learns the client reads (back
  // pressure: write the next only then). Returns false when nothing was
  // queued (an empty chunk, no stream, or the client is gone: then the
  // on-close callback runs instead, if it has not already).
  bool Write(std::string chunk, std::function<void()> on_written = nullptr);
  void Finish();

  // `on_close` runs once if the connection closes before the response
  // finished (the client went away, a write failed, or the server stopped):
  // how a long request learns to stop. Runs at once if that already
  // happened; never after the response finished.
  void SetOnClose(std::function<void()> on_close);

 private:
  friend class HttpConnection;
  enum class State { kIdle, kStreaming, kDone };

  HttpResponder(std::shared_ptr<HttpPostGate> gate, std::weak_ptr<HttpConnection> connection,
                uint64_t sequence, std::string description);

  // Posts op to run on the connection if it still exists.
  void PostLocked(std::function<void(HttpConnection&)> op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // From the connection (I/O thread): it closed before the response ended.
  void ConnectionClosed();

  const std::shared_ptr<HttpPostGate> gate_;
  const std::weak_ptr<HttpConnection> connection_;
  const uint64_t sequence_;        // which request of the connection
  const std::string description_;  // "GET /x from 1.2.3.4:5", for logs

  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kIdle;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_close_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_HTTP_HTTP_RESPONDER_H_
