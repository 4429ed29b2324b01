// HttpStream: the byte stream under one HTTP connection — a TCP socket, or
// TLS over one when the server has a TLS context. Beast's and Asio's
// operations are templates over the stream type; Visit() hands the active
// one to them, so the connection's code is written once for both.
//
// TLS allows one read and one write in flight at once, as TCP does, which
// is what HttpConnection relies on (it watches for a disconnect while a
// response is written).
//
// Thread-safety: none; used on the connection's I/O thread only.
#ifndef PDSERVE_COMMON_HTTP_HTTP_STREAM_H_
#define PDSERVE_COMMON_HTTP_HTTP_STREAM_H_

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <functional>
#include <utility>
#include <variant>

namespace pdserve {

class HttpStream {
 public:
  // Plaintext when `tls` is null.
  HttpStream(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls);

  // Calls f with the stream to read and write: a tcp::socket& or an
  // ssl::stream<tcp::socket>&.
  template <typename F>
  decltype(auto) Visit(F&& f) {
    return std::visit(std::forward<F>(f), stream_);
  }

  bool tls() const { return std::holds_alternative<Tls>(stream_); }
  boost::asio::ip::tcp::socket& socket();

  // The server side of the TLS handshake; `done` at once (posted) for
  // plaintext.
  void Handshake(std::function<void(const boost::system::error_code&)> done);

 private:
  using Tls = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;
  std::variant<boost::asio::ip::tcp::socket, Tls> stream_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_HTTP_HTTP_STREAM_H_
