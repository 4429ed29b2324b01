#include "router/generate_call.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "glog/logging.h"
#include "router/routing_policy.h"
#include "router/worker_failure.h"
#include "router/worker_requests.h"

namespace pdserve {
namespace {

// A client slower than its decode worker stops our reads at this many
// queued messages; HTTP/2 flow control then slows the worker.
constexpr size_t kPauseReadsAt = 32;
constexpr size_t kResumeReadsAt = 8;

std::string NewRequestId() {
  absl::BitGen gen;
  return absl::StrFormat("r-%016x", absl::Uniform<uint64_t>(gen));
}

}  // namespace

GenerateCall* GenerateCall::Create(const Env& env, grpc::CallbackServerContext* context,
                                   const v1::GenerateRequest& request) {
  auto* call = new GenerateCall(env, context);
  call->Start(request);
  return call;
}

GenerateCall::GenerateCall(const Env& env, grpc::CallbackServerContext* context)
    : env_(env), server_context_(context), timeline_(absl::Now()) {}

GenerateCall::~GenerateCall() {
  if (env_.on_destroyed) env_.on_destroyed();
}

void GenerateCall::Start(const v1::GenerateRequest& request) {
  const absl::Status id_ok = RequestValidator::ValidateRequestId(request.request_id());
  id_ = request.request_id().empty() || !id_ok.ok() ? NewRequestId() : request.request_id();
  const auto cap =
      std::chrono::system_clock::now() + std::chrono::milliseconds(env_.config->request_timeout_ms);
  deadline_ = std::min(server_context_->deadline(), cap);
  absl::StatusOr<ValidatedRequest> validated = env_.validator->Validate(request);
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    if (!validated.ok()) {
      Fail(ToGrpcStatus(validated.status()), &a);
    } else {
      request_ = std::move(*validated);
      relay_ = std::make_unique<TokenRelay>(
          env_.model->tokenizer(),
          TokenRelay::Options{request_.max_tokens, request_.stop, request_.return_token_ids,
                              request_.ignore_eos});
      LOG(INFO) << "[" << id_ << "] admitted: " << request_.prompt_tokens.size()
                << " prompt tokens, max_tokens " << request_.max_tokens;
      Place(&a);
    }
    Pump(&a);
  }
  Run(a);
  Release();
}

void GenerateCall::Place(Actions* a) {
  std::shared_ptr<const RegistrySnapshot> snapshot = env_.registry->snapshot();
  PlacementQuery q;
  q.decode.policy = env_.config->decode_policy;
  q.decode.prompt_tokens = static_cast<int32_t>(request_.prompt_tokens.size());
  q.decode.model_fingerprint = env_.model->fingerprint();
  q.decode.excluded = attempts_.excluded();
  q.decode.ticket = env_.decode_ticket->fetch_add(1, std::memory_order_relaxed);
  q.decode.now = absl::Now();
  q.prefill.policy = env_.config->prefill_policy;
  q.prefill.ticket = env_.prefill_ticket->load(std::memory_order_relaxed);
  q.prefill.now = q.decode.now;
  q.colocated = env_.config->colocated;
  q.local_prefill_max_tokens = env_.config->local_prefill_max_tokens;
  absl::StatusOr<Placement> placement = PlaceRequest(*snapshot, q);
  if (!placement.ok()) {
    Fail(attempts_.PlacementFailure(placement.status()), a);
    return;
  }
  std::shared_ptr<v1::DecodeWorker::Stub> stub =
      env_.registry->decode_stub(placement->decode->address);
  if (stub == nullptr) {
    // It left the pool (DNS) after the snapshot was taken: place again
    // without it, as if it had refused.
    attempts_.RecordRefusal(placement->decode->address,
                            grpc::Status(grpc::StatusCode::UNAVAILABLE, "left the worker pool"));
    Place(a);
    return;
  }
  decode_worker_ = *placement->decode;
  local_prefill_ = placement->local_prefill;
  v1::DecodeRequest r = MakeDecodeRequest(id_, request_, local_prefill_, env_.config->kv_wait_ms);
  DecodeStream::Observer* observer = this;
  streams_.push_back(
      std::make_unique<DecodeStream>(observer, decode_worker_.address, std::move(r), deadline_));
  decode_ = streams_.back().get();
  decode_active_ = true;
  event_seen_ = false;
  ++holds_;
  timeline_.MarkDecodeAsked(absl::Now());
  a->start_decode = decode_;
  a->decode_stub = std::move(stub);
  LOG(INFO) << "[" << id_ << "] decode worker " << decode_worker_.address << ", "
            << (local_prefill_ ? "local" : "remote") << " prefill (" << placement->why << ")";
}

bool GenerateCall::OnDecodeEvent(DecodeStream* stream, const v1::DecodeEvent& event) {
  Actions a;
  bool keep_reading = true;
  {
    absl::MutexLock lock(&mu_);
    if (stream == decode_ && !terminal_ && !decode_done_) {
      switch (event.event_case()) {
        case v1::DecodeEvent::kReserved:
          HandleReserved(event.reserved(), &a);
          break;
        case v1::DecodeEvent::kTokens:
          HandleTokens(event.tokens(), &a);
          break;
        case v1::DecodeEvent::kFinished:
          HandleFinished(event.finished(), &a);
          break;
        case v1::DecodeEvent::EVENT_NOT_SET:
          FailProtocol("sent an empty event", &a);
          break;
      }
    }
    if (!terminal_ && out_.pending() >= kPauseReadsAt) {
      VLOG(1) << "[" << id_ << "] client is slow: pausing reads from " << stream->address();
      keep_reading = false;
      read_paused_ = true;
    }
    Pump(&a);
  }
  Run(a);
  return keep_reading;
}

void GenerateCall::OnDecodeDone(DecodeStream* stream, const grpc::Status& status) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    if (stream == decode_) {
      decode_active_ = false;
      read_paused_ = false;
      if (!terminal_) HandleDecodeEnd(status, &a);
    }
    Pump(&a);
  }
  Run(a);
  Release();
}

void GenerateCall::OnPrefillDone(const grpc::Status& status) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    prefill_in_flight_ = false;
    prefill_ok_ = status.ok();
    if (!terminal_ && !status.ok()) {
      if (decode_done_) {
        // The decode worker got the KV and finished; only the prefill
        // worker's report (ack/metrics) was lost.
        LOG(WARNING) << "[" << id_ << "] prefill worker " << prefill_->address()
                     << " failed after the output was complete: " << status.error_message();
      } else {
        // Retrying on another prefill worker under a new epoch while the
        // decode worker keeps its reservation is not implemented yet.
        Fail(WorkerFailureStatus("prefill", prefill_->address(), status), &a);
      }
    }
    if (status.ok()) {
      LOG(INFO) << "[" << id_ << "] prefilled by " << prefill_->address() << " in "
                << prefill_->response().compute_ms() << " ms, KV "
                << prefill_->response().kv_transfer_bytes() << " bytes in "
                << prefill_->response().kv_transfer_ms() << " ms";
    }
    MaybeComplete(&a);
    Pump(&a);
  }
  Run(a);
  Release();
}

void GenerateCall::OnWriteDone(bool ok) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    out_.WriteDone();
    if (!ok) {
      client_gone_ = true;
      out_.DropPending();
      Fail(grpc::Status(grpc::StatusCode::CANCELLED, "client stream closed"), &a);
    }
    if (read_paused_ && out_.pending() <= kResumeReadsAt) {
      read_paused_ = false;
      if (decode_active_) a.resume_decode = decode_;
    }
    Pump(&a);
  }
  Run(a);
}

void GenerateCall::OnCancel() {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    client_gone_ = true;
    out_.DropPending();
    const bool expired = server_context_->deadline() <= std::chrono::system_clock::now();
    Fail(expired ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "client deadline exceeded")
                 : grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled"),
         &a);
    Pump(&a);
  }
  Run(a);
}

void GenerateCall::OnDone() { Release(); }

void GenerateCall::Fail(const grpc::Status& status, Actions* a) {
  if (terminal_) return;
  terminal_ = true;
  out_.Close(status);
  if (env_.metrics != nullptr) env_.metrics->CountRequest(status.error_code());
  // Problems the client caused are routine; the rest deserve attention.
  const grpc::StatusCode code = status.error_code();
  const bool routine = code == grpc::StatusCode::INVALID_ARGUMENT ||
                       code == grpc::StatusCode::OUT_OF_RANGE ||
                       code == grpc::StatusCode::CANCELLED || client_gone_;
  LOG_IF(INFO, routine) << "[" << id_ << "] " << StatusCodeName(code) << ": "
                        << status.error_message();
  LOG_IF(WARNING, !routine) << "[" << id_ << "] " << StatusCodeName(code) << ": "
                            << status.error_message();
  if (decode_active_) a->cancel_decode = decode_;
  if (prefill_in_flight_) a->cancel_prefill = prefill_.get();
}

void GenerateCall::FailProtocol(absl::string_view what, Actions* a) {
  Fail(grpc::Status(grpc::StatusCode::INTERNAL,
                    absl::StrCat("decode worker ", decode_worker_.address, " ", what)),
       a);
}

void GenerateCall::Pump(Actions* a) {
  ResponseQueue::Next next = out_.TakeNext();
  a->write = next.write;
  a->finish = std::move(next.finish);
}

void GenerateCall::Run(Actions& a) {
  if (a.start_decode != nullptr) a.start_decode->Start(std::move(a.decode_stub));
  if (a.start_prefill != nullptr) {
    a.start_prefill->Start(std::move(a.prefill_stub), [this](grpc::Status s) { OnPrefillDone(s); });
  }
  if (a.cancel_prefill != nullptr) a.cancel_prefill->Cancel();
  if (a.cancel_decode != nullptr) a.cancel_decode->Cancel();
  if (a.resume_decode != nullptr) a.resume_decode->Resume();
  if (a.write != nullptr) StartWrite(a.write);
  if (a.finish.has_value()) Finish(*a.finish);
}

void GenerateCall::Release() {
  bool last = false;
  {
    absl::MutexLock lock(&mu_);
    last = --holds_ == 0;
  }
  if (last) delete this;
}

}  // namespace pdserve
