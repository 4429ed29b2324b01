#include "common/base/io_thread.h"

#include <pthread.h>

#include <boost/asio/post.hpp>

#include "absl/synchronization/notification.h"

namespace pdserve {

IoThread::IoThread(const std::string& name)
    : work_(boost::asio::make_work_guard(context_)), thread_([this] { context_.run(); }) {
  pthread_setname_np(thread_.native_handle(), name.substr(0, 15).c_str());
}

IoThread::~IoThread() { Stop(); }

void IoThread::RunSync(absl::FunctionRef<void()> fn) {
  if (InThisThread()) {
    fn();
    return;
  }
  absl::Notification done;
  boost::asio::post(context_, [&] {
    fn();
    done.Notify();
  });
  done.WaitForNotification();
}

void IoThread::Stop() {
  if (!thread_.joinable()) return;
  work_.reset();
  context_.stop();
  thread_.join();
}

}  // namespace pdserve
