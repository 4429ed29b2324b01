#include "common/http/http_connection.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"
#include "common/http/http_responder.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

// Statuses whose responses carry no body (RFC 9110 6.4.1); Beast refuses a
// body on them.
bool NoBodyStatus(int status) { return status / 100 == 1 || status == 204 || status == 304; }

// Adds the handler's headers and content type, and settles keep-alive: the
// connection stays open only if the request allowed it and the handler did
// not ask for "Connection: close".
template <class Body>
void SetHeaders(http::response<Body>& res, int status, const std::string& content_type,
                const HttpHeaderList& headers, bool* keep_alive) {
  res.version(11);
  res.result(static_cast<unsigned>(status));
  for (const auto& [name, value] : headers) res.insert(name, value);
  if (!content_type.empty()) res.set(http::field::content_type, content_type);
  *keep_alive = *keep_alive && res.keep_alive();
  res.keep_alive(*keep_alive);
}

}  // namespace

HttpConnection::HttpConnection(asio::ip::tcp::socket socket, uint64_t id, const Config& config)
    : tls_context_(config.tls != nullptr ? config.tls->Current() : nullptr),
      stream_(std::move(socket), tls_context_.get()),
      timer_(stream_.socket().get_executor()),
      id_(id),
      config_(config) {
  error_code ec;
  const asio::ip::tcp::endpoint peer = stream_.socket().remote_endpoint(ec);
  peer_ = ec ? "unknown peer" : FormatHostPort(peer.address().to_string(), peer.port());
}

void HttpConnection::Start() {
  if (!stream_.tls()) {
    AwaitRequest();
    return;
  }
  // The read timeout bounds the handshake too: a client that opens a
  // connection and says nothing is closed.
  phase_ = Phase::kAwaitRequest;
  parser_.emplace();
  ArmTimer();
  stream_.Handshake([self = shared_from_this()](const error_code& ec) {
    if (self->phase_ == Phase::kClosed) return;
    if (ec) {
      LOG(INFO) << "TLS handshake with " << self->peer_ << " failed: " << ec.message();
      self->Close();
      return;
    }
    self->AwaitRequest();
  });
}

void HttpConnection::AwaitRequest() {
  phase_ = Phase::kAwaitRequest;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(config_.max_header_bytes));
  parser_->body_limit(config_.max_body_bytes);
  ArmTimer();
  if (!watching_) {
    ReadRequest();
  } else if (buffer_.size() > 0) {
    // A pipelined request is already buffered; the read still pending from
    // the response may wait forever, so cancel it (OnWatch then reads).
    error_code ignored;
    stream_.socket().cancel(ignored);
  }
  // Else the pending read continues into this request (OnWatch).
}

void HttpConnection::ReadRequest() {
  stream_.Visit([&](auto& s) {
    http::async_read(
        s, buffer_, *parser_,
        [self = shared_from_this()](const error_code& ec, size_t) { self->OnRead(ec); });
  });
}

void HttpConnection::ArmTimer() {
  const uint64_t generation = ++timer_generation_;
  timer_.expires_after(config_.read_timeout);
  timer_.async_wait([self = shared_from_this(), generation](const error_code& ec) {
    if (ec || generation != self->timer_generation_) return;
    if (self->phase_ == Phase::kAwaitRequest) {
      if (self->buffer_.size() > 0 || self->parser_->got_some()) {
        LOG(WARNING) << "HTTP client " << self->peer_ << " sent no complete request within "
                     << self->config_.read_timeout.count() << " ms; closing";
      } else {
        VLOG(1) << "idle HTTP connection from " << self->peer_ << " closed";
      }
    }
    self->Close();
  });
}

void HttpConnection::OnRead(const error_code& ec) {
  if (phase_ != Phase::kAwaitRequest) return;  // closed by the timer or the server
  ++timer_generation_;
  timer_.cancel();
  if (ec == http::error::end_of_stream) {
    Close();  // the client closed between requests: the normal end
    return;
  }
  if (ec) {
    int status = 400;
    if (ec == http::error::header_limit) {
      status = 431;
    } else if (ec == http::error::body_limit) {
      status = 413;
    } else if (ec.category() != http::make_error_code(http::error::bad_method).category()) {
      LOG(INFO) << "HTTP connection from " << peer_ << ": read failed: " << ec.message();
      Close();
      return;
    }
    LOG(WARNING) << "bad HTTP request from " << peer_ << ": " << ec.message() << "; answering "
                 << status;
    ++sequence_;
    phase_ = Phase::kResponding;
    responder_.reset();
    head_ = false;
    response_started_ = false;
    SendError(sequence_, status);
    return;
  }

  http::request<http::string_body> message = parser_->release();
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request.version = static_cast<int>(message.version());
  for (const auto& field : message) {
    request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(message.body());
  request.peer = peer_;

  ++sequence_;
  phase_ = Phase::kResponding;
  keep_alive_ = message.keep_alive();
  head_ = message.method() == http::verb::head;
  chunked_ = message.version() >= 11;
  response_started_ = false;
  std::shared_ptr<HttpResponder> responder(
      new HttpResponder(config_.gate, weak_from_this(), sequence_,
                        absl::StrCat(request.method, " ", request.target, " from ", peer_)));
  responder_ = responder;
  Watch();
  (*config_.handler)(std::move(request), std::move(responder));
}

void HttpConnection::Watch() {
  if (watching_ || phase_ == Phase::kClosed) return;
  // While answering, buffer at most a header block of a pipelined request;
  // past that the socket is left unread (and a disconnect goes unnoticed
  // until the next write).
  if (phase_ == Phase::kResponding && buffer_.size() >= config_.max_header_bytes) return;
  watching_ = true;
  stream_.Visit([&](auto& s) {
    s.async_read_some(
        buffer_.prepare(4096),
        [self = shared_from_this()](const error_code& ec, size_t n) { self->OnWatch(ec, n); });
  });
}

void HttpConnection::OnWatch(const error_code& ec, size_t n) {
  watching_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec == boost::asio::error::operation_aborted && phase_ == Phase::kAwaitRequest) {
    ReadRequest();  // cancelled by AwaitRequest
    return;
  }
  if (ec) {
    if (phase_ == Phase::kResponding) {
      LOG(INFO) << "HTTP client " << peer_ << " went away before its response finished ("
                << ec.message() << ")";
    }
    Close();
    return;
  }
  buffer_.commit(n);
  switch (phase_) {
    case Phase::kResponding:
      Watch();
      break;
    case Phase::kDraining:
      buffer_.consume(buffer_.size());
      Watch();
      break;
    case Phase::kAwaitRequest:
      ReadRequest();
      break;
    case Phase::kClosed:
      break;
  }
}

void HttpConnection::Close() {
  if (phase_ == Phase::kClosed) return;
  const bool responding = phase_ == Phase::kResponding;
  phase_ = Phase::kClosed;
  ++timer_generation_;
  timer_.cancel();
  // TLS gets no close_notify: a peer that is gone or misbehaving would
  // hold the close up, and HTTP framing already says where a response ends.
  error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
  writes_.clear();
  if (responding) {
    if (std::shared_ptr<HttpResponder> r = responder_.lock()) r->ConnectionClosed();
  }
  responder_.reset();
  if (config_.on_closed) config_.on_closed(id_);
}

bool HttpConnection::Current(uint64_t sequence) const {
  return phase_ == Phase::kResponding && sequence == sequence_;
}

void HttpConnection::SendResponse(uint64_t sequence, int status, std::string content_type,
                                  std::string body, HttpHeaderList headers) {
  if (!Current(sequence) || response_started_) return;
  response_started_ = true;
  auto res = std::make_shared<http::response<http::string_body>>();
  SetHeaders(*res, status, content_type, headers, &keep_alive_);
  if (NoBodyStatus(status)) {
    body.clear();
  } else if (head_) {
    res->content_length(body.size());  // what GET would send, without it
  } else {
    res->body() = std::move(body);
    res->prepare_payload();
  }
  Enqueue(
      [this, res](WriteDone done) {
        stream_.Visit([&](auto& s) {
          http::async_write(
              s, *res, [res, done = std::move(done)](const error_code& ec, size_t) { done(ec); });
        });
      },
      /*last=*/true);
}

void HttpConnection::SendStreamHead(uint64_t sequence, int status, std::string content_type,
                                    HttpHeaderList headers) {
  if (!Current(sequence) || response_started_) return;
  response_started_ = true;
  // HTTP/1.0 has no chunked encoding: the body runs until the close.
  if (!chunked_) keep_alive_ = false;
  if (config_.stream_send_buffer_bytes > 0) {
    error_code ignored;  // a refused size leaves the kernel's: no worse than before
    stream_.socket().set_option(
        asio::socket_base::send_buffer_size(config_.stream_send_buffer_bytes), ignored);
  }
  auto res = std::make_shared<http::response<http::empty_body>>();
  SetHeaders(*res, status, content_type, headers, &keep_alive_);
  if (chunked_) res->chunked(true);
  auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*res);
  Enqueue(
      [this, res, serializer](WriteDone done) {
        stream_.Visit([&](auto& s) {
          http::async_write_header(s, *serializer,
                                   [res, serializer, done = std::move(done)](const error_code& ec,
                                                                             size_t) { done(ec); });
        });
      },
      /*last=*/false);
}

void HttpConnection::SendChunk(uint64_t sequence, std::string chunk,
                               std::function<void()> written) {
  if (!Current(sequence) || !response_started_ || head_) return;
  auto data = std::make_shared<std::string>(std::move(chunk));
  Enqueue(
      [this, data, written = std::move(written)](WriteDone done) mutable {
        const asio::const_buffer bytes(data->data(), data->size());
        auto on_written = [data, done = std::move(done), written = std::move(written)](
                              const error_code& ec, size_t) {
          if (!ec && written) written();
          done(ec);
        };
        stream_.Visit([&](auto& s) {
          if (chunked_) {
            auto framed = std::make_shared<http::chunk_body<asio::const_buffer>>(bytes);
            asio::async_write(s, *framed,
                              [framed, on_written = std::move(on_written)](
                                  const error_code& ec, size_t n) { on_written(ec, n); });
          } else {
            asio::async_write(s, bytes, std::move(on_written));
          }
        });
      },
      /*last=*/false);
}

void HttpConnection::SendStreamEnd(uint64_t sequence) {
  if (!Current(sequence) || !response_started_) return;
  Enqueue(
      [this](WriteDone done) {
        if (!chunked_ || head_) {
          // Nothing to frame: the stream ends here (HTTP/1.0: at the close).
          asio::post(stream_.socket().get_executor(),
                     [done = std::move(done)] { done(error_code()); });
          return;
        }
        auto last = std::make_shared<http::chunk_last<http::chunk_crlf>>();
        stream_.Visit([&](auto& s) {
          asio::async_write(
              s, *last, [last, done = std::move(done)](const error_code& ec, size_t) { done(ec); });
        });
      },
      /*last=*/true);
}

void HttpConnection::SendError(uint64_t sequence, int status) {
  if (!Current(sequence)) return;
  if (response_started_) {
    Close();  // too late for a status: cut the response off
    return;
  }
  keep_alive_ = false;
  if (config_.error_body != nullptr) {
    auto [content_type, body] = (*config_.error_body)(status);
    SendResponse(sequence, status, std::move(content_type), std::move(body), {});
    return;
  }
  const std::string reason(http::obsolete_reason(static_cast<http::status>(status)));
  SendResponse(sequence, status, "text/plain; charset=utf-8",
               absl::StrCat(status, " ", reason, "\n"), {});
}

void HttpConnection::Abort(uint64_t sequence) {
  if (Current(sequence)) Close();
}

void HttpConnection::Enqueue(WriteOp op, bool last) {
  if (phase_ != Phase::kResponding) return;
  writes_.emplace_back(std::move(op), last);
  if (!writing_) WriteNext();
}

void HttpConnection::WriteNext() {
  if (writes_.empty()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  auto [op, last] = std::move(writes_.front());
  writes_.pop_front();
  op([self = shared_from_this(), last = last](const error_code& ec) {
    if (self->phase_ != Phase::kResponding) return;  // closed meanwhile
    if (ec) {
      LOG(INFO) << "HTTP write to " << self->peer_ << " failed: " << ec.message();
      self->Close();
      return;
    }
    if (last) {
      self->writing_ = false;
      self->ResponseWritten();
      return;
    }
    self->WriteNext();
  });
}

void HttpConnection::ResponseWritten() {
  responder_.reset();
  writes_.clear();
  if (keep_alive_) {
    AwaitRequest();
    return;
  }
  // Closing with request bytes still unread would reset the connection and
  // could destroy the response in flight (an oversized request): so
  // half-close and discard input until the client closes, bounded by the
  // read timeout.
  phase_ = Phase::kDraining;
  error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  ArmTimer();
  Watch();
}

}  // namespace pdserve
