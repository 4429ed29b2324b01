// ResponseQueue: the write discipline of one server stream. gRPC allows a
// single outstanding write per stream, so messages queue here and leave one
// at a time; once the outcome is decided (Close) and the queue has drained,
// the stream is finished with that status. If the client is gone, queued
// messages are dropped and the stream finishes at once.
//
// Messages are held as messages: the door serialises them if its client
// is remote (GenerateClient).
//
// Not thread-safe: GenerateCall serialises access under its mutex. The
// message handed out by TakeNext() stays untouched until WriteDone(), so
// the door may read it while the owner's mutex is released.
#ifndef PDSERVE_ROUTER_CALL_RESPONSE_QUEUE_H_
#define PDSERVE_ROUTER_CALL_RESPONSE_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "grpcpp/support/status.h"
#include "pdserve/v1/generation.pb.h"

namespace pdserve::router {

class ResponseQueue {
 public:
  void Push(v1::GenerateResponse response) {
    bytes_ += static_cast<int64_t>(response.ByteSizeLong());
    pending_.push_back(std::move(response));
  }
  // Decides the final status; the first call wins.
  void Close(const grpc::Status& status) {
    if (closed_) return;
    closed_ = true;
    status_ = status;
  }
  // The client is gone: nothing queued will ever be delivered.
  void DropPending() {
    dropped_ = true;
    pending_.clear();
    bytes_ = 0;
  }
  void WriteDone() { writing_ = false; }

  // The next operation to issue: a message to write, the status to finish
  // with, or neither (a write is outstanding, or nothing is decided yet).
  struct Next {
    const v1::GenerateResponse* write = nullptr;
    std::optional<grpc::Status> finish;
  };
  Next TakeNext() {
    if (writing_ || finished_) return {};
    if (!pending_.empty() && !dropped_) {
      in_write_ = std::move(pending_.front());
      pending_.pop_front();
      bytes_ -= static_cast<int64_t>(in_write_.ByteSizeLong());
      writing_ = true;
      return {&in_write_, std::nullopt};
    }
    if (!closed_) return {};
    finished_ = true;
    return {nullptr, status_};
  }

  size_t pending() const { return pending_.size(); }
  // Serialized size of the queued messages (the one in the write excluded).
  int64_t pending_bytes() const { return bytes_; }

 private:
  std::deque<v1::GenerateResponse> pending_;
  int64_t bytes_ = 0;
  v1::GenerateResponse in_write_;
  bool writing_ = false;
  bool closed_ = false;
  bool dropped_ = false;
  bool finished_ = false;
  grpc::Status status_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_RESPONSE_QUEUE_H_
