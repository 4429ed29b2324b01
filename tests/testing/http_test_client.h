// A blocking HTTP/1.1 client on Beast for tests of pdserve's HTTP APIs:
// one request per connection, the whole response read (chunked bodies
// decoded), and the SSE `data:` payloads of a streamed one split out.
#ifndef PDSERVE_TESTS_TESTING_HTTP_TEST_CLIENT_H_
#define PDSERVE_TESTS_TESTING_HTTP_TEST_CLIENT_H_

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace pdserve::testing {

struct HttpResult {
  int status = 0;  // 0: no response (connection failed or closed)
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  std::string Header(const std::string& name) const {
    for (const auto& [k, v] : headers) {
      if (absl::EqualsIgnoreCase(k, name)) return v;
    }
    return "";
  }
  // The `data:` payloads of a text/event-stream body, in order.
  std::vector<std::string> Events() const {
    std::vector<std::string> out;
    for (absl::string_view line : absl::StrSplit(body, '\n')) {
      if (absl::ConsumePrefix(&line, "data: ")) out.emplace_back(line);
    }
    return out;
  }
};

namespace internal {

inline boost::asio::ip::tcp::endpoint Endpoint(const std::string& address) {
  const size_t colon = address.rfind(':');
  return {boost::asio::ip::make_address(address.substr(0, colon)),
          static_cast<uint16_t>(std::stoi(address.substr(colon + 1)))};
}

// One request and its response on a connected stream (TCP or TLS).
// `read_pause` > 0 reads the response as a slow client would: at most 1 KiB
// at a time with that pause between reads.
template <typename Stream>
HttpResult Exchange(Stream& stream, const std::string& address, const std::string& method,
                    const std::string& target, const std::string& body,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    absl::Duration read_pause = absl::ZeroDuration()) {
  namespace http = boost::beast::http;
  HttpResult out;
  boost::system::error_code ec;
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, address);
  req.set(http::field::connection, "close");
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  http::write(stream, req, ec);
  if (ec) return out;
  const bool slow = read_pause > absl::ZeroDuration();
  boost::beast::flat_buffer buffer(slow ? 1024 : std::numeric_limits<size_t>::max());
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  if (slow) {
    while (!ec && !parser.is_done()) {
      http::read_some(stream, buffer, parser, ec);
      absl::SleepFor(read_pause);
    }
  } else {
    http::read(stream, buffer, parser, ec);
  }
  // A close before a whole response is no response (Beast reads a
  // close-delimited body's end as success).
  if (ec) return out;
  const auto& res = parser.get();
  out.status = res.result_int();
  out.body = res.body();
  for (const auto& f : res) out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  return out;
}

}  // namespace internal

// `address` is "127.0.0.1:port".
inline HttpResult HttpCall(const std::string& address, const std::string& method,
                           const std::string& target, const std::string& body = "",
                           const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect(internal::Endpoint(address), ec);
  if (ec) return {};
  return internal::Exchange(socket, address, method, target, body, headers);
}

// HttpCall read slowly (see internal::Exchange), through a 4 KiB receive
// buffer so that the server's writes wait on this reader.
inline HttpResult HttpCallSlowly(const std::string& address, const std::string& method,
                                 const std::string& target, const std::string& body,
                                 absl::Duration read_pause) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.open(boost::asio::ip::tcp::v4(), ec);
  if (!ec) socket.set_option(boost::asio::socket_base::receive_buffer_size(4096), ec);
  if (!ec) socket.connect(internal::Endpoint(address), ec);
  if (ec) return {};
  return internal::Exchange(socket, address, method, target, body, {}, read_pause);
}

// The same over TLS, trusting the PEM roots in `ca_file`; no response when
// the handshake fails.
inline HttpResult HttpsCall(const std::string& address, const std::string& ca_file,
                            const std::string& method, const std::string& target,
                            const std::string& body = "",
                            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  namespace ssl = boost::asio::ssl;
  boost::asio::io_context io;
  ssl::context ctx(ssl::context::tls_client);
  boost::system::error_code ec;
  ctx.load_verify_file(ca_file, ec);
  if (ec) return {};
  ctx.set_verify_mode(ssl::verify_peer);
  ssl::stream<boost::asio::ip::tcp::socket> stream(io, ctx);
  stream.next_layer().connect(internal::Endpoint(address), ec);
  if (ec) return {};
  stream.handshake(ssl::stream_base::client, ec);
  if (ec) return {};
  return internal::Exchange(stream, address, method, target, body, headers);
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_HTTP_TEST_CLIENT_H_
