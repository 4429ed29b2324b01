#include "common/http/http_responder.h"

#include <utility>

#include "common/http/http_connection.h"
#include "common/http/http_post_gate.h"
#include "glog/logging.h"

namespace pdserve {

HttpResponder::HttpResponder(std::shared_ptr<HttpPostGate> gate,
                             std::weak_ptr<HttpConnection> connection, uint64_t sequence,
                             std::string description)
    : gate_(std::move(gate)),
      connection_(std::move(connection)),
      sequence_(sequence),
      description_(std::move(description)) {}

HttpResponder::~HttpResponder() {
  absl::MutexLock lock(&mu_);
  if (state_ == State::kDone || closed_) return;
  LOG(ERROR) << "HTTP handler dropped its responder without finishing the response to "
             << description_;
  const uint64_t seq = sequence_;
  if (state_ == State::kIdle) {
    PostLocked([seq](HttpConnection& c) { c.SendError(seq, 500); });
  } else {
    // The status line is out; all that is left is to cut the stream so the
    // client does not take it for complete.
    PostLocked([seq](HttpConnection& c) { c.Abort(seq); });
  }
}

void HttpResponder::PostLocked(std::function<void(HttpConnection&)> op) {
  gate_->Post([connection = connection_, op = std::move(op)] {
    if (std::shared_ptr<HttpConnection> c = connection.lock()) op(*c);
  });
}

void HttpResponder::Respond(int status, std::string content_type, std::string body,
                            HttpHeaderList headers) {
  absl::MutexLock lock(&mu_);
  if (state_ != State::kIdle) {
    LOG(ERROR) << "HttpResponder::Respond after the response started, to " << description_;
    return;
  }
  state_ = State::kDone;
  PostLocked([seq = sequence_, status, content_type = std::move(content_type),
              body = std::move(body), headers = std::move(headers)](HttpConnection& c) mutable {
    c.SendResponse(seq, status, std::move(content_type), std::move(body), std::move(headers));
  });
}

void HttpResponder::StartStream(int status, std::string content_type, HttpHeaderList headers) {
  absl::MutexLock lock(&mu_);
  if (state_ != State::kIdle) {
    LOG(ERROR) << "HttpResponder::StartStream after the response started, to " << description_;
    return;
  }
  state_ = State::kStreaming;
  PostLocked([seq = sequence_, status, content_type = std::move(content_type),
              headers = std::move(headers)](HttpConnection& c) mutable {
    c.SendStreamHead(seq, status, std::move(content_type), std::move(headers));
  });
}

bool HttpResponder::Write(std::string chunk, std::function<void()> on_written) {
  absl::MutexLock lock(&mu_);
  if (state_ != State::kStreaming) {
    LOG(ERROR) << "HttpResponder::Write outside a stream, to " << description_;
    return false;
  }
  if (chunk.empty() || closed_) return false;
  PostLocked([seq = sequence_, chunk = std::move(chunk),
              on_written = std::move(on_written)](HttpConnection& c) mutable {
    c.SendChunk(seq, std::move(chunk), std::move(on_written));
  });
  return true;
}

void HttpResponder::Finish() {
  absl::MutexLock lock(&mu_);
  if (state_ != State::kStreaming) {
    LOG(ERROR) << "HttpResponder::Finish outside a stream, to " << description_;
    return;
  }
  state_ = State::kDone;
  PostLocked([seq = sequence_](HttpConnection& c) { c.SendStreamEnd(seq); });
}

void HttpResponder::SetOnClose(std::function<void()> on_close) {
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) {
      on_close_ = std::move(on_close);
      return;
    }
  }
  // The connection closed before the callback was set: the caller still
  // has to learn it, and it is outside the lock like every other call.
  if (on_close) on_close();
}

void HttpResponder::ConnectionClosed() {
  std::function<void()> on_close;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    on_close = std::move(on_close_);
    on_close_ = nullptr;
  }
  if (on_close) on_close();
}

}  // namespace pdserve
