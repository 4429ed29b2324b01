#include "common/kv/kv_stream.h"

#include <utility>

namespace pdserve {

namespace asio = boost::asio;
using asio::ip::tcp;

KvStream::Session::Session(tcp::socket socket, std::shared_ptr<asio::ssl::context> ctx)
    : context(std::move(ctx)), plain(socket.get_executor()) {
  if (context == nullptr) {
    plain = std::move(socket);
  } else {
    tls.emplace(std::move(socket), *context);
  }
}

KvStream::KvStream(const executor_type& executor, std::shared_ptr<ReloadingTlsContext> tls)
    : source_(std::move(tls)), session_(NewSession(tcp::socket(executor))) {}

KvStream::KvStream(tcp::socket socket, std::shared_ptr<ReloadingTlsContext> tls)
    : source_(std::move(tls)), session_(NewSession(std::move(socket))) {}

std::shared_ptr<KvStream::Session> KvStream::NewSession(tcp::socket socket) const {
  // Each session takes the context current now: a rotated certificate
  // reaches the next connection.
  return std::make_shared<Session>(std::move(socket),
                                   source_ == nullptr ? nullptr : source_->Current());
}

void KvStream::Reset() {
  boost::system::error_code ignored;
  socket().close(ignored);
  const executor_type executor = socket().get_executor();
  session_ = NewSession(tcp::socket(executor));
}

}  // namespace pdserve
