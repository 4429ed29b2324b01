#include "common/http/http_stream.h"

#include <boost/asio/post.hpp>
#include <utility>

namespace pdserve {
namespace {

std::variant<boost::asio::ip::tcp::socket,
             boost::asio::ssl::stream<boost::asio::ip::tcp::socket>>
MakeStream(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls) {
  if (tls == nullptr) return std::move(socket);
  return boost::asio::ssl::stream<boost::asio::ip::tcp::socket>(std::move(socket), *tls);
}

}  // namespace

HttpStream::HttpStream(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls)
    : stream_(MakeStream(std::move(socket), tls)) {}

boost::asio::ip::tcp::socket& HttpStream::socket() {
  if (Tls* t = std::get_if<Tls>(&stream_)) return t->next_layer();
  return std::get<boost::asio::ip::tcp::socket>(stream_);
}

void HttpStream::Handshake(std::function<void(const boost::system::error_code&)> done) {
  if (Tls* t = std::get_if<Tls>(&stream_)) {
    t->async_handshake(boost::asio::ssl::stream_base::server, std::move(done));
    return;
  }
  boost::asio::post(socket().get_executor(),
                    [done = std::move(done)] { done(boost::system::error_code()); });
}

}  // namespace pdserve
