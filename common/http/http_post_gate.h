// HttpPostGate: posts work to a server's I/O thread from any thread, until
// the server closes the gate. Responders may outlive their server (a
// handler thread can still hold one); the gate is what they share with it,
// so a late Respond() or Write() is dropped instead of touching a destroyed
// io_context.
//
// Thread-safety: all methods from any thread.
#ifndef PDSERVE_COMMON_HTTP_HTTP_POST_GATE_H_
#define PDSERVE_COMMON_HTTP_HTTP_POST_GATE_H_

#include <boost/asio/io_context.hpp>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pdserve {

class HttpPostGate {
 public:
  explicit HttpPostGate(boost::asio::io_context* io) : io_(io) {}

  // Queues fn on the I/O thread (FIFO: posts from one thread run in the
  // order posted); false, and fn is dropped, once the gate is closed.
  bool Post(std::function<void()> fn);
  // After this returns no Post() reaches the io_context.
  void Close();

 private:
  absl::Mutex mu_;
  boost::asio::io_context* io_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_HTTP_HTTP_POST_GATE_H_
