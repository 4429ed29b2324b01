#include "router/api/openai/openai_call.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "router/api/openai/openai_error.h"

namespace pdserve::router::openai {

void OpenAiCall::Start(LocalGeneration& router, const Caller& caller, OpenAiRequest request,
                       OpenAiResponse response, std::shared_ptr<HttpResponder> responder,
                       std::function<void()> on_destroyed) {
  std::shared_ptr<OpenAiCall> call(new OpenAiCall(std::move(request), std::move(response),
                                                  std::move(responder), std::move(on_destroyed)));
  absl::StatusOr<std::shared_ptr<LocalGeneration::Call>> opened = router.Open(caller, call.get());
  if (!opened.ok()) return call->Fail(ToGrpcStatus(opened.status()));
  call->self_ = call;
  call->weak_self_ = call;
  {
    absl::MutexLock lock(&call->mu_);
    call->call_ = *opened;
  }
  (*opened)->Start(call->request_.generate);
  // After the start: a client already gone cancels a started request.
  call->responder_->SetOnClose([weak = std::weak_ptr<OpenAiCall>(call)] {
    if (std::shared_ptr<OpenAiCall> c = weak.lock()) c->Cancel();
  });
}

void OpenAiCall::Cancel() {
  // A chunk the client will now never take: its write failed.
  ChunkWritten(false);
  std::shared_ptr<LocalGeneration::Call> call;
  {
    absl::MutexLock lock(&mu_);
    call = call_;
  }
  if (call != nullptr) call->Cancel();
}

void OpenAiCall::ChunkWritten(bool ok) {
  if (!chunk_pending_.exchange(false)) return;  // once per chunk
  std::shared_ptr<LocalGeneration::Call> call;
  {
    absl::MutexLock lock(&mu_);
    call = call_;
  }
  if (call != nullptr) call->WriteDone(ok);
}

bool OpenAiCall::WriteChunk(const v1::Chunk& chunk) {
  std::string event = response_.StreamChunk(chunk);
  if (event.empty()) return true;  // held back (a possible tool call)
  // Done when the socket took it: a client that does not read holds the
  // router to this one chunk, and the router stops reading the decode
  // worker (back pressure), instead of queueing the stream here.
  chunk_pending_.store(true);
  const bool queued = responder_->Write(std::move(event), [weak = weak_self_] {
    if (std::shared_ptr<OpenAiCall> c = weak.lock()) c->ChunkWritten(true);
  });
  if (queued) return false;
  chunk_pending_.store(false);  // the client is gone; its close cancels
  return true;
}

OpenAiCall::OpenAiCall(OpenAiRequest request, OpenAiResponse response,
                       std::shared_ptr<HttpResponder> responder, std::function<void()> on_destroyed)
    : on_destroyed_(std::move(on_destroyed)),
      request_(std::move(request)),
      response_(std::move(response)),
      responder_(std::move(responder)) {}

OpenAiCall::~OpenAiCall() {
  if (on_destroyed_) on_destroyed_();
}

bool OpenAiCall::Write(const v1::GenerateResponse& message) {
  switch (message.event_case()) {
    case v1::GenerateResponse::kStarted:
      OnStarted(message.started());
      break;
    case v1::GenerateResponse::kChunk:
      if (request_.stream) return WriteChunk(message.chunk());
      response_.Append(message.chunk());  // bounded by max_tokens
      break;
    case v1::GenerateResponse::kFinished:
      finished_ = message.finished();
      break;
    case v1::GenerateResponse::EVENT_NOT_SET:
      break;
  }
  return true;
}

void OpenAiCall::OnStarted(const v1::Started& started) {
  request_id_ = started.request_id();
  response_.Start(started);
  if (!request_.stream) return;
  streaming_ = true;
  responder_->StartStream(200, "text/event-stream; charset=utf-8",
                          {{"Cache-Control", "no-cache"}, {"X-Request-Id", request_id_}});
  responder_->Write(response_.StreamStart());
}

void OpenAiCall::Finish(const grpc::Status& status) {
  if (!status.ok()) {
    Fail(status);
  } else if (!finished_.has_value()) {
    Fail(grpc::Status(grpc::StatusCode::INTERNAL, "the stream ended without Finished"));
  } else if (streaming_) {
    responder_->Write(response_.StreamEnd(*finished_));
    responder_->Finish();
  } else {
    responder_->Respond(200, "application/json", response_.Whole(*finished_),
                        {{"X-Request-Id", request_id_}});
  }
  // The router is done with us: let go of its request, then of ourselves
  // (in that order, `self` last: it may delete this).
  std::shared_ptr<OpenAiCall> self = std::move(self_);
  std::shared_ptr<LocalGeneration::Call> call;
  {
    absl::MutexLock lock(&mu_);
    call = std::move(call_);
  }
}

void OpenAiCall::Fail(const grpc::Status& status) {
  const OpenAiError e = FromGrpcStatus(status);
  if (status.error_code() == grpc::StatusCode::CANCELLED) {
    VLOG(1) << "OpenAI request " << request_id_ << " cancelled: " << status.error_message();
  } else {
    LOG(WARNING) << "OpenAI request " << (request_id_.empty() ? "(not started)" : request_id_)
                 << " failed: " << e.http_status << " " << e.type << ": " << e.message;
  }
  if (!streaming_) {
    RespondError(*responder_, e);
    return;
  }
  // The status line went out with the head: the error can only be an event.
  responder_->Write(absl::StrCat("data: ", e.Body(), "\n\n"));
  responder_->Finish();
}

}  // namespace pdserve::router::openai
