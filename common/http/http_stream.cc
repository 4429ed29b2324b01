#include "common/http/http_stream.h"

#include <boost/asio/post.hpp>
#include <utility>

namespace pdserve {
namespace {

using Stream = std::variant<boost::asio::ip::tcp::socket,
                            boost::asio::ssl::stream<boost::asio::ip::tcp::socket>>;

// Each alternative built in place: no converting move (which GCC calls
// redundant and older compilers need).
Stream MakeStream(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls) {
  if (tls == nullptr) return Stream(std::in_place_index<0>, std::move(socket));
  return Stream(std::in_place_index<1>, std::move(socket), *tls);
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
