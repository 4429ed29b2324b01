// KvStream: the byte stream one KV connection runs on — plain TCP, or TLS
// over TCP when the KV plane is encrypted (--kv_tls), so that a prompt's
// KV does not cross a shared network in clear. Both connection classes
// read and write it with asio::async_read / async_write whatever it is: it
// models Asio's AsyncReadStream and AsyncWriteStream.
//
// TLS is mutual: each end presents its certificate (the worker's
// --tls_cert) and requires the other's, signed by the CA the context
// trusts (--tls_client_ca), as between the tiers' gRPC ports. The context
// is a ReloadingTlsContext (common/tls/reloading_tls_context.h), as the
// HTTPS API's: each new session takes the current certificate, so
// rotation needs no restart. A TLS session cannot be reused after a
// failure, so Reset() builds a fresh one (the sender reconnects on the
// same object).
//
// Each connection's socket (and TLS session) lives in a Session that every
// operation started on it holds until its handler has run: an SSL
// operation cut by Reset() may still take further steps on its session
// after the cut (its completion was already queued), so nothing short of
// the operations' own references knows when the session is free.
//
// Not thread-safe: one I/O thread, one read and one write outstanding.
#ifndef PDSERVE_COMMON_KV_KV_STREAM_H_
#define PDSERVE_COMMON_KV_KV_STREAM_H_

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <memory>
#include <optional>
#include <utility>

#include "common/tls/reloading_tls_context.h"

namespace pdserve {

namespace kv_stream_internal {

// A completion handler that keeps `Owner` alive until it has run; Asio
// sees the wrapped handler's executor and allocator (see the trait
// specialisations at the end of this file).
template <typename Owner, typename Handler>
struct Holding {
  std::shared_ptr<Owner> owner;
  Handler handler;

  template <typename... Args>
  void operator()(Args&&... args) {
    handler(std::forward<Args>(args)...);
  }
};

}  // namespace kv_stream_internal

class KvStream {
 public:
  using executor_type = boost::asio::any_io_executor;
  using Tls = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;

  // A stream to connect (sender): TLS with `tls`, plain TCP with null.
  KvStream(const executor_type& executor, std::shared_ptr<ReloadingTlsContext> tls);
  // An accepted connection (receiver).
  KvStream(boost::asio::ip::tcp::socket socket, std::shared_ptr<ReloadingTlsContext> tls);

  executor_type get_executor() { return socket().get_executor(); }
  // The TCP socket underneath (options, shutdown, close). Asynchronous
  // operations go through the stream, which keeps their session alive.
  boost::asio::ip::tcp::socket& socket() { return session_->socket(); }
  bool encrypted() const { return source_ != nullptr; }

  template <typename Endpoints, typename Handler>
  void async_connect(const Endpoints& endpoints, Handler&& handler) {
    boost::asio::async_connect(socket(), endpoints, Hold(std::forward<Handler>(handler)));
  }
  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (session_->tls) {
      return session_->tls->async_read_some(buffers, Hold(std::forward<Handler>(handler)));
    }
    session_->plain.async_read_some(buffers, Hold(std::forward<Handler>(handler)));
  }
  template <typename Buffers, typename Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (session_->tls) {
      return session_->tls->async_write_some(buffers, Hold(std::forward<Handler>(handler)));
    }
    session_->plain.async_write_some(buffers, Hold(std::forward<Handler>(handler)));
  }
  // The TLS handshake as client (sender) or server (receiver), verifying
  // the peer's certificate; for plain TCP it completes at once.
  template <typename Handler>
  void async_handshake(bool client, Handler&& handler) {
    if (!session_->tls) {
      return boost::asio::post(
          session_->plain.get_executor(),
          [h = std::forward<Handler>(handler)]() mutable { h(boost::system::error_code()); });
    }
    session_->tls->async_handshake(client ? Tls::client : Tls::server,
                                   Hold(std::forward<Handler>(handler)));
  }

  // The peer closed the connection: a TCP end of stream, or over TLS one
  // without a close_notify (peers close the socket, never the session).
  static bool IsPeerClose(const boost::system::error_code& ec) {
    return ec == boost::asio::error::eof || ec == boost::asio::ssl::error::stream_truncated;
  }

  // Closes the socket and starts a fresh session (a fresh TLS session if
  // encrypted), so the stream can connect again (a sender's reconnect).
  // The old session goes when the last of its cut operations has run.
  void Reset();

 private:
  // One connection: its socket, and over it the TLS session with the
  // context that session was made from (which must outlive it).
  struct Session {
    Session(boost::asio::ip::tcp::socket socket, std::shared_ptr<boost::asio::ssl::context> ctx);
    boost::asio::ip::tcp::socket& socket() { return tls ? tls->next_layer() : plain; }

    const std::shared_ptr<boost::asio::ssl::context> context;  // null for plain TCP
    boost::asio::ip::tcp::socket plain;                        // moved into tls if encrypted
    std::optional<Tls> tls;
  };

  template <typename Handler>
  kv_stream_internal::Holding<Session, std::decay_t<Handler>> Hold(Handler&& handler) {
    return {session_, std::forward<Handler>(handler)};
  }
  std::shared_ptr<Session> NewSession(boost::asio::ip::tcp::socket socket) const;

  const std::shared_ptr<ReloadingTlsContext> source_;
  std::shared_ptr<Session> session_;
};

}  // namespace pdserve

namespace boost::asio {

template <typename Owner, typename Handler, typename Executor>
struct associated_executor<pdserve::kv_stream_internal::Holding<Owner, Handler>, Executor> {
  using type = typename associated_executor<Handler, Executor>::type;
  static type get(const pdserve::kv_stream_internal::Holding<Owner, Handler>& h,
                  const Executor& ex = Executor()) noexcept {
    return associated_executor<Handler, Executor>::get(h.handler, ex);
  }
};

template <typename Owner, typename Handler, typename Allocator>
struct associated_allocator<pdserve::kv_stream_internal::Holding<Owner, Handler>, Allocator> {
  using type = typename associated_allocator<Handler, Allocator>::type;
  static type get(const pdserve::kv_stream_internal::Holding<Owner, Handler>& h,
                  const Allocator& a = Allocator()) noexcept {
    return associated_allocator<Handler, Allocator>::get(h.handler, a);
  }
};

}  // namespace boost::asio

#endif  // PDSERVE_COMMON_KV_KV_STREAM_H_
