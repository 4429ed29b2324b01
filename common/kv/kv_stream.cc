#include "common/kv/kv_stream.h"

#include <utility>

namespace pdserve {

namespace asio = boost::asio;
using asio::ip::tcp;

KvStream::KvStream(const executor_type& executor, std::shared_ptr<ReloadingTlsContext> tls)
    : source_(std::move(tls)), plain_(executor) {
  if (source_ == nullptr) return;
  context_ = source_->Current();
  tls_ = std::make_shared<Tls>(tcp::socket(executor), *context_);
}

KvStream::KvStream(tcp::socket socket, std::shared_ptr<ReloadingTlsContext> tls)
    : source_(std::move(tls)), plain_(socket.get_executor()) {
  if (source_ == nullptr) {
    plain_ = std::move(socket);
    return;
  }
  context_ = source_->Current();
  tls_ = std::make_shared<Tls>(std::move(socket), *context_);
}

void KvStream::Reset() {
  boost::system::error_code ignored;
  socket().close(ignored);
  if (tls_ == nullptr) return;
  const executor_type executor = tls_->get_executor();
  // Closing queued the cancelled operations' completions, which still
  // touch the old session: it goes after them, with its context.
  asio::post(executor, [old = std::move(tls_), context = context_] {});
  context_ = source_->Current();
  tls_ = std::make_shared<Tls>(tcp::socket(executor), *context_);
}

}  // namespace pdserve
