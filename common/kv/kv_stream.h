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
// rotation needs no restart. A
// TLS session cannot be reused after a failure, so Reset() builds a fresh
// one (the sender reconnects on the same object).
//
// Not thread-safe: one I/O thread, one read and one write outstanding.
#ifndef PDSERVE_COMMON_KV_KV_STREAM_H_
#define PDSERVE_COMMON_KV_KV_STREAM_H_

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <memory>
#include <utility>

#include "common/tls/reloading_tls_context.h"

namespace pdserve {

class KvStream {
 public:
  using executor_type = boost::asio::any_io_executor;
  using Tls = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;

  // A stream to connect (sender): TLS with `tls`, plain TCP with null.
  KvStream(const executor_type& executor, std::shared_ptr<ReloadingTlsContext> tls);
  // An accepted connection (receiver).
  KvStream(boost::asio::ip::tcp::socket socket, std::shared_ptr<ReloadingTlsContext> tls);

  executor_type get_executor() { return socket().get_executor(); }
  // The TCP socket underneath (connect, options, close).
  boost::asio::ip::tcp::socket& socket() { return tls_ ? tls_->next_layer() : plain_; }
  bool encrypted() const { return tls_ != nullptr; }

  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) return tls_->async_read_some(buffers, std::forward<Handler>(handler));
    plain_.async_read_some(buffers, std::forward<Handler>(handler));
  }
  template <typename Buffers, typename Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) return tls_->async_write_some(buffers, std::forward<Handler>(handler));
    plain_.async_write_some(buffers, std::forward<Handler>(handler));
  }
  // The TLS handshake as client (sender) or server (receiver), verifying
  // the peer's certificate; for plain TCP it completes at once.
  template <typename Handler>
  void async_handshake(bool client, Handler&& handler) {
    if (!tls_) {
      return boost::asio::post(plain_.get_executor(),
                               [h = std::forward<Handler>(handler)]() mutable {
                                 h(boost::system::error_code());
                               });
    }
    tls_->async_handshake(client ? Tls::client : Tls::server, std::forward<Handler>(handler));
  }

  // The peer closed the connection: a TCP end of stream, or over TLS one
  // without a close_notify (peers close the socket, never the session).
  static bool IsPeerClose(const boost::system::error_code& ec) {
    return ec == boost::asio::error::eof || ec == boost::asio::ssl::error::stream_truncated;
  }

  // Closes the socket; the stream can then connect again (a sender's
  // reconnect), with a fresh TLS session if encrypted. The old session is
  // destroyed only after the completions of its cancelled operations ran
  // (they still touch it).
  void Reset();

 private:
  const std::shared_ptr<ReloadingTlsContext> source_;
  // The context of the current session, which must outlive it.
  std::shared_ptr<boost::asio::ssl::context> context_;
  boost::asio::ip::tcp::socket plain_;  // unused when encrypted
  std::shared_ptr<Tls> tls_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_STREAM_H_
