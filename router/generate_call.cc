#include "router/generate_call.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "router/routing_policy.h"
#include "common/grpc_status.h"
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

struct GenerateCall::Actions {
  DecodeStream* start_decode = nullptr;
  v1::DecodeWorker::Stub* decode_stub = nullptr;
  PrefillCall* start_prefill = nullptr;
  v1::PrefillWorker::Stub* prefill_stub = nullptr;
  DecodeStream* cancel_decode = nullptr;
  PrefillCall* cancel_prefill = nullptr;
  DecodeStream* resume_decode = nullptr;
  bool start_write = false;
  bool finish = false;
  grpc::Status finish_status;
};

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
          TokenRelay::Options{request_.max_tokens, request_.stop, request_.return_token_ids});
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
  a->decode_stub = env_.registry->decode_stub(decode_worker_.address);
  CHECK(a->decode_stub != nullptr) << decode_worker_.address;
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
    if (!terminal_ && pending_.size() >= kPauseReadsAt) {
      VLOG(1) << "[" << id_ << "] client is slow: pausing reads from " << stream->address();
      keep_reading = false;
      read_paused_ = true;
    }
    Pump(&a);
  }
  Run(a);
  return keep_reading;
}

bool GenerateCall::AcceptFirstEvent(bool reserved, Actions* a) {
  if (event_seen_) {
    if (!reserved) return true;
    FailProtocol("reserved twice", a);
    return false;
  }
  event_seen_ = true;
  if (reserved == local_prefill_) {
    FailProtocol(
        reserved ? "reserved KV for a local-prefill request" : "sent output before reserving KV",
        a);
    return false;
  }
  // Local requests announce themselves with their first output, remote ones
  // once their prefill worker is chosen (HandleReserved).
  if (local_prefill_) PushStarted("");
  return true;
}

void GenerateCall::HandleReserved(const v1::Reserved& reserved, Actions* a) {
  if (!AcceptFirstEvent(/*reserved=*/true, a)) return;
  timeline_.MarkReserved(absl::Now());
  cached_prefix_tokens_ = reserved.cached_prefix_tokens();
  std::shared_ptr<const RegistrySnapshot> snapshot = env_.registry->snapshot();
  PrefillQuery q;
  q.policy = env_.config->prefill_policy;
  q.ticket = env_.prefill_ticket->fetch_add(1, std::memory_order_relaxed);
  q.now = absl::Now();
  absl::StatusOr<const WorkerState*> prefill = PickPrefill(*snapshot, decode_worker_, q);
  if (!prefill.ok()) {
    const bool gone = absl::IsNotFound(prefill.status());
    Fail(gone ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                             "every prefill worker went away after placement")
              : ToGrpcStatus(prefill.status()),
         a);
    return;
  }
  const std::string& address = (*prefill)->address;
  v1::PrefillRequest r =
      MakePrefillRequest(id_, request_, reserved, decode_worker_.info.kv_endpoint());
  prefill_ = std::make_unique<PrefillCall>(address, std::move(r), deadline_);
  prefill_in_flight_ = true;
  ++holds_;
  a->start_prefill = prefill_.get();
  a->prefill_stub = env_.registry->prefill_stub(address);
  CHECK(a->prefill_stub != nullptr) << address;
  PushStarted(address);
  LOG(INFO) << "[" << id_ << "] reserved on " << decode_worker_.address << " (transfer "
            << reserved.transfer_id() << ", epoch " << reserved.epoch() << ", "
            << reserved.cached_prefix_tokens() << " cached tokens); prefill on " << address;
}

void GenerateCall::HandleTokens(const v1::Tokens& tokens, Actions* a) {
  if (!AcceptFirstEvent(/*reserved=*/false, a)) return;
  if (tokens.ids_size() > 0) timeline_.MarkFirstToken(absl::Now());
  absl::StatusOr<TokenRelay::Output> out = relay_->Push(tokens);
  if (!out.ok()) {
    FailProtocol(out.status().message(), a);
    return;
  }
  if (out->has_chunk) PushChunk(std::move(out->chunk));
  if (out->stopped) {
    LOG(INFO) << "[" << id_ << "] stop string matched after " << relay_->completion_tokens()
              << " tokens; cancelling the decode stream";
    decode_done_ = true;
    reason_ = v1::FINISH_REASON_STOP;
    if (decode_active_) a->cancel_decode = decode_;
    MaybeComplete(a);
  }
}

void GenerateCall::HandleFinished(const v1::DecodeFinished& f, Actions* a) {
  if (!AcceptFirstEvent(/*reserved=*/false, a)) return;
  decode_finished_ = f;
  decode_done_ = true;
  reason_ = f.reason();
  MaybeComplete(a);
}

void GenerateCall::MaybeComplete(Actions* a) {
  if (terminal_ || !decode_done_ || prefill_in_flight_) return;
  TokenRelay::Output tail = relay_->Flush();
  if (tail.stopped) reason_ = v1::FINISH_REASON_STOP;
  if (tail.has_chunk) PushChunk(std::move(tail.chunk));
  v1::GenerateResponse response;
  v1::Finished* finished = response.mutable_finished();
  finished->set_reason(reason_);
  finished->mutable_usage()->set_prompt_tokens(static_cast<int32_t>(request_.prompt_tokens.size()));
  finished->mutable_usage()->set_completion_tokens(relay_->completion_tokens());
  finished->mutable_usage()->set_cached_prompt_tokens(static_cast<int32_t>(cached_prefix_tokens_));
  *finished->mutable_timings() =
      timeline_.Merge(decode_finished_.timings(), prefill_ok_ ? &prefill_->response() : nullptr,
                      local_prefill_, absl::Now());
  LOG(INFO) << "[" << id_ << "] finished: " << v1::FinishReason_Name(reason_) << ", "
            << relay_->completion_tokens() << " tokens, ttft " << finished->timings().ttft_ms()
            << " ms, e2e " << finished->timings().e2e_ms() << " ms";
  pending_.push_back(std::move(response));
  terminal_ = true;
  finish_status_ = grpc::Status::OK;
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

void GenerateCall::HandleDecodeEnd(const grpc::Status& status, Actions* a) {
  const std::string& address = decode_worker_.address;
  if (decode_done_) {
    MaybeComplete(a);
    return;
  }
  // Nothing was produced yet, so another decode worker can take the request
  // as if it had been placed there first.
  if (!event_seen_ && DecodeAttempts::IsRetryable(status)) {
    LOG(INFO) << "[" << id_ << "] decode worker " << address
              << " refused: " << status.error_message() << "; trying another";
    attempts_.RecordRefusal(address, status);
    Place(a);
    return;
  }
  if (status.ok()) {
    FailProtocol("ended the stream without DecodeFinished", a);
    return;
  }
  // Our own deadline (client's or --request_timeout_ms) is reported as such;
  // a worker-side timeout (e.g. the KV never arrived) keeps its message.
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
      std::chrono::system_clock::now() >= deadline_) {
    Fail(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      absl::StrCat("deadline exceeded after ",
                                   absl::FormatDuration(timeline_.Elapsed(absl::Now())),
                                   " waiting for decode worker ", address, " (",
                                   relay_->completion_tokens(), " tokens generated)")),
         a);
    return;
  }
  Fail(WorkerFailureStatus("decode", address, status), a);
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
    writing_ = false;
    if (!ok) {
      client_gone_ = true;
      pending_.clear();
      Fail(grpc::Status(grpc::StatusCode::CANCELLED, "client stream closed"), &a);
    }
    if (read_paused_ && pending_.size() <= kResumeReadsAt) {
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
    pending_.clear();
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
  finish_status_ = status;
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

void GenerateCall::PushStarted(const std::string& prefill_worker) {
  v1::GenerateResponse response;
  v1::Started* started = response.mutable_started();
  started->set_request_id(id_);
  started->set_prompt_tokens(static_cast<int32_t>(request_.prompt_tokens.size()));
  started->set_decode_worker(decode_worker_.address);
  started->set_prefill_worker(prefill_worker);
  pending_.push_back(std::move(response));
}

void GenerateCall::PushChunk(v1::Chunk chunk) {
  v1::GenerateResponse response;
  *response.mutable_chunk() = std::move(chunk);
  pending_.push_back(std::move(response));
}

void GenerateCall::Pump(Actions* a) {
  if (writing_ || finish_sent_) return;
  if (!pending_.empty() && !client_gone_) {
    in_write_ = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    a->start_write = true;
    return;
  }
  if (terminal_) {
    finish_sent_ = true;
    a->finish = true;
    a->finish_status = finish_status_;
  }
}

void GenerateCall::Run(Actions& a) {
  if (a.start_decode != nullptr) a.start_decode->Start(a.decode_stub);
  if (a.start_prefill != nullptr) {
    a.start_prefill->Start(a.prefill_stub, [this](grpc::Status s) { OnPrefillDone(s); });
  }
  if (a.cancel_prefill != nullptr) a.cancel_prefill->Cancel();
  if (a.cancel_decode != nullptr) a.cancel_decode->Cancel();
  if (a.resume_decode != nullptr) a.resume_decode->Resume();
  if (a.start_write) StartWrite(&in_write_);
  if (a.finish) Finish(a.finish_status);
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
