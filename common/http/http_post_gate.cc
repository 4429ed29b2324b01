#include "common/http/http_post_gate.h"

#include <boost/asio/post.hpp>
#include <utility>

namespace pdserve {

bool HttpPostGate::Post(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  // Posting under the lock is what makes Close() a barrier.
  if (io_ == nullptr) return false;
  boost::asio::post(*io_, std::move(fn));
  return true;
}

void HttpPostGate::Close() {
  absl::MutexLock lock(&mu_);
  io_ = nullptr;
}

}  // namespace pdserve
