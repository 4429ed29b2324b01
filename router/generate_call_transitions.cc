// GenerateCall's state transitions on decode and prefill events (see the
// state machine in generate_call.h). generate_call.cc holds the gRPC
// plumbing: construction, reactions, locking and the Actions they issue.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/grpc_status.h"
#include "glog/logging.h"
#include "router/generate_call.h"
#include "router/routing_policy.h"
#include "router/worker_failure.h"
#include "router/worker_requests.h"

namespace pdserve::router {

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
  reserved_ = reserved;
  LOG(INFO) << "[" << id_ << "] reserved on " << decode_worker_.address << " (transfer "
            << reserved.transfer_id() << ", epoch " << reserved.epoch() << ", "
            << reserved.cached_prefix_tokens() << " cached tokens)";
  StartPrefill(a);
}

void GenerateCall::HandleTokens(const v1::Tokens& tokens, Actions* a) {
  if (!AcceptFirstEvent(/*reserved=*/false, a)) return;
  // Tokens on a remote attempt mean its KV arrived: a prefill failure from
  // now on only loses the prefill worker's report.
  kv_committed_ = true;
  timeline_.MarkTokens(absl::Now(), tokens.ids_size());
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

// The decode worker's prefix-cache hit on the prompt: announced in Reserved
// when the KV comes from a prefill worker, reported at the end when the
// decode worker prefilled itself. A failover's prompt includes the tokens
// generated before it, which are not the client's prompt.
int32_t GenerateCall::CachedPromptTokens() const {
  if (!local_prefill_) return static_cast<int32_t>(cached_prefix_tokens_);
  return static_cast<int32_t>(std::min<size_t>(decode_finished_.timings().prefill_cached_tokens(),
                                               request_.prompt_tokens.size()));
}

v1::Placement GenerateCall::FinalPlacement() const {
  v1::Placement p;
  p.set_decode_worker(decode_worker_.address);
  if (!local_prefill_ && prefill_ != nullptr) p.set_prefill_worker(prefill_->address());
  p.set_prefill_attempts(static_cast<uint32_t>(prefills_.size()));
  p.set_decode_failovers(static_cast<uint32_t>(failovers_));
  return p;
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
  finished->mutable_usage()->set_cached_prompt_tokens(CachedPromptTokens());
  *finished->mutable_timings() =
      timeline_.Merge(decode_finished_.timings(), prefill_ok_ ? &prefill_->response() : nullptr,
                      local_prefill_, absl::Now());
  *finished->mutable_placement() = FinalPlacement();
  if (env_.breaker != nullptr && !decode_broke_) {
    env_.breaker->RecordSuccess(decode_worker_.address);
  }
  LOG(INFO) << "[" << id_ << "] finished: " << v1::FinishReason_Name(reason_) << ", "
            << relay_->completion_tokens() << " tokens, ttft " << finished->timings().ttft_ms()
            << " ms, e2e " << finished->timings().e2e_ms() << " ms";
  if (env_.metrics != nullptr) {
    env_.metrics->ObserveFinished(finished->timings(), relay_->completion_tokens(),
                                  timeline_.inter_token_seconds());
    env_.metrics->CountRequest(grpc::StatusCode::OK);
  }
  out_.Push(response);
  terminal_ = true;
  out_.Close(grpc::Status::OK);
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
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      // It died before answering: as in a failover, give its replacement
      // a moment to become live.
      RecordWorkerFailure(address, decode_started_);
      if (failover_wait_until_ == absl::Time()) {
        failover_wait_until_ = absl::Now() + retry_.failover_wait;
      }
    }
    attempts_.RecordRefusal(address, status);
    Place(a);
    return;
  }
  if (status.ok()) {
    FailProtocol("ended the stream without DecodeFinished", a);
    return;
  }
  if (TryFailover(status, a)) return;
  if (TryLocalPrefillAfterKvWait(status, a)) return;
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

void GenerateCall::PushStarted(const std::string& prefill_worker) {
  // A retried prefill or a failover keeps the client's one Started.
  if (started_sent_) return;
  started_sent_ = true;
  v1::GenerateResponse response;
  v1::Started* started = response.mutable_started();
  started->set_request_id(id_);
  started->set_prompt_tokens(static_cast<int32_t>(request_.prompt_tokens.size()));
  started->set_decode_worker(decode_worker_.address);
  started->set_prefill_worker(prefill_worker);
  out_.Push(response);
}

void GenerateCall::PushChunk(v1::Chunk chunk) {
  v1::GenerateResponse response;
  *response.mutable_chunk() = std::move(chunk);
  out_.Push(response);
}

}  // namespace pdserve::router
