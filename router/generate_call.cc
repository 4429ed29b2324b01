#include "router/generate_call.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "router/routing_policy.h"
#include "router/worker_failure.h"
#include "router/worker_requests.h"

namespace pdserve::router {
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
    : env_(env),
      retry_(env.config->retry_options()),
      server_context_(context),
      timeline_(absl::Now()) {}

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
  // After a decode failover the new worker continues from the tokens the
  // client already has: it prefills prompt + those tokens itself.
  const std::vector<int32_t>& generated = relay_->generated_ids();
  const absl::Time now = absl::Now();
  PlacementQuery q;
  q.decode.policy = env_.config->decode_policy;
  q.decode.prompt_tokens = static_cast<int32_t>(request_.prompt_tokens.size() + generated.size());
  q.decode.max_tokens = request_.max_tokens - static_cast<int32_t>(generated.size());
  q.decode.prompt = request_.prompt_tokens;
  q.decode.model_fingerprint = env_.model->fingerprint();
  q.decode.excluded = attempts_.excluded();
  if (env_.breaker != nullptr) q.decode.ejected = env_.breaker->Ejected(now);
  q.decode.ticket = env_.decode_ticket->fetch_add(1, std::memory_order_relaxed);
  q.decode.now = now;
  q.prefill.policy = env_.config->prefill_policy;
  q.prefill.prompt = request_.prompt_tokens;
  q.prefill.ticket = env_.prefill_ticket->load(std::memory_order_relaxed);
  q.prefill.ejected = q.decode.ejected;
  q.prefill.now = now;
  const bool fell_back = local_fallback_why_ != nullptr;
  q.colocated = env_.config->colocated || !generated.empty() || fell_back;
  if (!env_.config->colocated && fell_back) {
    q.forced_why = local_fallback_why_;
    q.forced_reason = "prefill_fallback";
  } else if (!env_.config->colocated) {
    q.forced_why = "a decode failover";
  }
  q.local_prefill_max_tokens = env_.config->local_prefill_max_tokens;
  q.prefill_saturation_tokens = env_.config->prefill_saturation_tokens;
  // What this router placed since each worker's last report counts too.
  RegistrySnapshot adjusted;
  const RegistrySnapshot* view = snapshot.get();
  if (env_.ledger != nullptr) {
    adjusted = *snapshot;
    env_.ledger->Apply(&adjusted);
    view = &adjusted;
  }
  absl::StatusOr<Placement> placement = PlaceRequest(*view, q);
  if (!placement.ok()) {
    const grpc::Status failure = attempts_.PlacementFailure(placement.status());
    if (WaitForDecodeWorker(failure, a)) return;
    Fail(failure, a);
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
  ++placement_;
  if (env_.metrics != nullptr) {
    env_.metrics->CountRouting(RoutingTier::kDecode, q.decode.policy);
    env_.metrics->CountPrefillDecision(placement->local_prefill, placement->reason);
  }
  decode_worker_ = *placement->decode;
  local_prefill_ = placement->local_prefill;
  decode_started_ = now;
  if (env_.ledger != nullptr) {
    const int64_t block = std::max(decode_worker_.info.kv_layout().block_size(), 1u);
    const int64_t tokens = int64_t{q.decode.prompt_tokens} + q.decode.max_tokens;
    env_.ledger->Record(decode_worker_.address, decode_worker_.last_report,
                        (tokens + block - 1) / block);
  }
  kv_committed_ = false;
  prefill_ok_ = false;
  v1::DecodeRequest r =
      MakeDecodeRequest(id_, request_, local_prefill_, env_.config->kv_wait_ms, generated);
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
  last_decode_event_ = absl::Now();
  ArmWatchdog(a);
  LOG(INFO) << "[" << id_ << "] decode worker " << decode_worker_.address << ", "
            << (local_prefill_ ? "local" : "remote") << " prefill ("
            << (generated.empty() ? placement->why : "continuing after a decode failover")
            << (generated.empty() ? "" : absl::StrCat(", from token ", generated.size())) << ")";
}

bool GenerateCall::OnDecodeEvent(DecodeStream* stream, const v1::DecodeEvent& event) {
  Actions a;
  bool keep_reading = true;
  {
    absl::MutexLock lock(&mu_);
    // An attempt given up (watchdog, fallback) may still deliver events
    // while the request waits for a new placement: they are not its own.
    const bool current = stream == decode_ && decode_active_;
    if (current) last_decode_event_ = absl::Now();
    if (current && !terminal_ && !decode_done_) {
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
    if (current && !terminal_ && out_.pending() >= kPauseReadsAt) {
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
    // The end of an attempt already given up was handled when it was.
    if (stream == decode_ && decode_active_) {
      decode_active_ = false;
      read_paused_ = false;
      if (!terminal_) HandleDecodeEnd(status, &a);
    }
    Pump(&a);
  }
  Run(a);
  Release();
}

void GenerateCall::OnPrefillDone(PrefillCall* call, const grpc::Status& status) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    // A call replaced by a retry or a failover was already accounted for.
    if (call == prefill_ && prefill_in_flight_) {
      prefill_in_flight_ = false;
      prefill_ok_ = status.ok();
      if (status.ok()) {
        if (env_.breaker != nullptr) env_.breaker->RecordSuccess(call->address());
        LOG(INFO) << "[" << id_ << "] prefilled by " << call->address() << " in "
                  << call->response().compute_ms() << " ms, KV "
                  << call->response().kv_transfer_bytes() << " bytes in "
                  << call->response().kv_transfer_ms() << " ms";
      } else if (!terminal_) {
        HandlePrefillFailure(status, &a);
      }
      MaybeComplete(&a);
    }
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
    // The client's own deadline timer fires a moment before ours (its
    // deadline reached us as a timeout, measured from our receive time):
    // a cancel that close to the deadline is the deadline.
    const bool expired = server_context_->deadline() <=
                         std::chrono::system_clock::now() + std::chrono::milliseconds(50);
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
  StopPrefillSide(a);
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
  // The stream ends: the watchdog lets go of the call at once.
  if (a->finish.has_value() && watchdog_ != nullptr) a->cancel_watchdog = watchdog_;
}

void GenerateCall::Run(Actions& a) {
  if (a.start_decode != nullptr) a.start_decode->Start(std::move(a.decode_stub));
  if (a.start_prefill != nullptr) {
    PrefillCall* call = a.start_prefill;
    call->Start(std::move(a.prefill_stub),
                [this, call](grpc::Status s) { OnPrefillDone(call, s); });
  }
  if (a.start_watchdog != nullptr) {
    a.start_watchdog->Set(
        std::chrono::system_clock::now() + absl::ToChronoMicroseconds(a.watchdog_delay),
        [this](bool fired) { OnWatchdog(fired); });
  }
  if (a.start_backoff != nullptr) {
    const uint64_t placement = a.backoff_placement;
    a.start_backoff->Set(
        std::chrono::system_clock::now() + absl::ToChronoMicroseconds(a.backoff_delay),
        [this, placement](bool) { OnBackoffDone(placement); });
  }
  if (a.start_retry != nullptr) {
    TransferRetryCall* call = a.start_retry;
    const uint64_t placement = a.retry_placement;
    call->Start(std::move(a.retry_stub), [this, placement, call](grpc::Status s) {
      OnRetryTransferDone(placement, call, s);
    });
  }
  if (a.cancel_prefill != nullptr) a.cancel_prefill->Cancel();
  if (a.cancel_retry != nullptr) a.cancel_retry->Cancel();
  if (a.cancel_decode != nullptr) a.cancel_decode->Cancel();
  if (a.resume_decode != nullptr) a.resume_decode->Resume();
  if (a.cancel_watchdog != nullptr) a.cancel_watchdog->Cancel();
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

}  // namespace pdserve::router
