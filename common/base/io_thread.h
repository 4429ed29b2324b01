// IoThread: a Boost.Asio io_context with one thread of its own, on which a
// transport runs all its sockets and timers (KV transport I/O
// never runs on the engine thread).
//
// Thread-safety: context() may be used from any thread to post work;
// RunSync() from any thread (inline on the I/O thread itself).
#ifndef PDSERVE_COMMON_BASE_IO_THREAD_H_
#define PDSERVE_COMMON_BASE_IO_THREAD_H_

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <string>
#include <thread>

#include "absl/functional/function_ref.h"

namespace pdserve {

class IoThread {
 public:
  // Starts the thread; `name` (at most 15 characters) shows up in debuggers.
  explicit IoThread(const std::string& name);
  // Stop()s; handlers still queued are destroyed, not run.
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  boost::asio::io_context& context() { return context_; }
  bool InThisThread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // Runs fn on the I/O thread and returns after it ran. Handlers on this
  // thread never block, so the wait is short and bounded.
  void RunSync(absl::FunctionRef<void()> fn);

  // Stops the loop and joins the thread. Idempotent; call before destroying
  // objects whose handlers may still be queued.
  void Stop();

 private:
  boost::asio::io_context context_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_BASE_IO_THREAD_H_
