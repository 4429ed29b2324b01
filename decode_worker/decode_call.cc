#include "decode_worker/decode_call.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/proto_convert.h"
#include "common/rpc/stream_outbox.h"
#include "glog/logging.h"

namespace pdserve {

struct DecodeCall::State {
  explicit State(DecodeCall* reactor) : outbox(reactor) {}

  StreamOutbox<v1::DecodeEvent> outbox;
  std::atomic<bool> cancelled{false};
  std::string request_id;
  int32_t prompt_len = 0;
  absl::Time start = absl::Now();
  // Engine thread only.
  int64_t seq_id = 0;
  bool awaiting_kv = false;
  absl::Status error;  // why the engine sequence was cancelled, if we did it
  absl::Time reserved_at, committed_at;
  uint64_t kv_bytes = 0;
  double first_step_ms = 0;
};

namespace {

using State = DecodeCall::State;

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

v1::FinishReason ToProtoReason(FinishReason r) {
  switch (r) {
    case FinishReason::kLength:
    case FinishReason::kContextFull:
      return v1::FINISH_REASON_LENGTH;
    case FinishReason::kEos:
      return v1::FINISH_REASON_EOS;
    case FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    default:
      return v1::FINISH_REASON_UNSPECIFIED;
  }
}

void SendFinished(State& st, const TokenEvent& ev) {
  v1::DecodeEvent out;
  v1::DecodeFinished* f = out.mutable_finished();
  f->set_reason(ToProtoReason(ev.finish));
  f->set_completion_tokens(ev.token >= 0 ? ev.index + 1 : ev.index);
  v1::Timings* t = f->mutable_timings();
  if (st.reserved_at != absl::Time()) t->set_decode_admission_ms(Ms(st.reserved_at - st.start));
  t->set_kv_transfer_bytes(st.kv_bytes);
  t->set_first_decode_step_ms(st.first_step_ms);
  t->set_prefill_mode(st.kv_bytes > 0 ? "remote" : "local");
  st.outbox.Push(std::move(out));
  st.outbox.Close(grpc::Status::OK);
}

// Engine thread: one sampled token and/or the end of the sequence.
void OnTokenEvent(State& st, const TokenEvent& ev) {
  if (ev.token >= 0) {
    if (ev.index == 1 && st.committed_at != absl::Time()) {
      st.first_step_ms = Ms(absl::Now() - st.committed_at);
    }
    v1::DecodeEvent out;
    out.mutable_tokens()->add_ids(ev.token);
    out.mutable_tokens()->set_first_index(ev.index);
    st.outbox.Push(std::move(out));
  }
  if (ev.finish == FinishReason::kNone) return;
  if (ev.finish == FinishReason::kCancelled) {
    st.outbox.Close(ToGrpcStatus(st.error.ok() ? absl::CancelledError("request cancelled")
                                                : st.error));
    return;
  }
  SendFinished(st, ev);
}

// Engine thread: the receiver finished the transfer (or gave up on it).
void OnKvDone(Engine& engine, State& st, const absl::StatusOr<KvCommit>& commit) {
  if (!st.awaiting_kv) return;  // already cancelled
  st.awaiting_kv = false;
  if (!commit.ok()) {
    LOG(WARNING) << "[" << st.request_id << "] kv transfer failed: " << commit.status();
    st.error = commit.status();
    engine.Cancel(st.seq_id);
    return;
  }
  st.committed_at = absl::Now();
  st.kv_bytes = commit->total_bytes;
  absl::Status s = engine.CommitPrefilled(st.seq_id, commit->first_token);
  if (!s.ok()) {
    LOG(WARNING) << "[" << st.request_id << "] commit rejected: " << s;
    st.outbox.Close(ToGrpcStatus(s));
  }
}

SequenceOptions ToSequenceOptions(const v1::DecodeRequest& req) {
  SequenceOptions o;
  o.prompt.assign(req.prompt_tokens().begin(), req.prompt_tokens().end());
  o.sampling = FromProto(req.sampling());
  o.max_tokens = req.max_tokens();
  o.ignore_eos = req.ignore_eos();
  return o;
}

// Engine thread: registers the reserved blocks with the receiver and tells
// the router where to send the KV.
void ExpectKv(DecodeContext* ctx, const std::shared_ptr<State>& st, Engine& engine,
              absl::Duration wait) {
  const uint64_t transfer_id = static_cast<uint64_t>(st->seq_id);
  // Only the prompt's blocks receive KV; the rest are for generated tokens.
  std::vector<int32_t> blocks = engine.BlocksOf(st->seq_id);
  blocks.resize(std::min<size_t>(blocks.size(),
                                 BlocksForTokens(st->prompt_len, ctx->layout.block_size)));
  EngineLoop* loop = ctx->loop;
  absl::Status s = ctx->receiver->Expect(
      transfer_id, 1, blocks, ctx->layout.n_layers, absl::Now() + wait,
      [st, loop](absl::StatusOr<KvCommit> r) {
        loop->Post([st, r](Engine& e) { OnKvDone(e, *st, r); });
      });
  if (!s.ok()) {
    st->error = s;
    engine.Cancel(st->seq_id);
    return;
  }
  st->awaiting_kv = true;
  st->reserved_at = absl::Now();
  v1::DecodeEvent out;
  v1::Reserved* r = out.mutable_reserved();
  r->set_transfer_id(transfer_id);
  r->set_epoch(1);
  r->set_kv_endpoint(ctx->kv_endpoint);
  *r->mutable_kv_layout() = ToProto(ctx->layout);
  r->set_num_blocks(static_cast<uint32_t>(blocks.size()));
  st->outbox.Push(std::move(out));
}

}  // namespace

DecodeCall::DecodeCall(DecodeContext* ctx, grpc::CallbackServerContext* rpc,
                       const v1::DecodeRequest& req)
    : ctx_(ctx), state_(std::make_shared<State>(this)) {
  state_->request_id = req.request_id();
  state_->prompt_len = req.prompt_tokens_size();
  if (ctx->draining.load()) {
    state_->outbox.Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode worker is draining"));
    return;
  }
  absl::Duration wait = req.kv_wait_ms() > 0 ? absl::Milliseconds(req.kv_wait_ms())
                                             : ctx->default_kv_wait;
  wait = std::min(wait, ctx->max_kv_wait);
  const bool local = req.local_prefill();
  std::shared_ptr<State> st = state_;
  SequenceOptions opts = ToSequenceOptions(req);
  const bool posted = ctx->loop->Post([ctx, st, opts = std::move(opts), local, wait](Engine& e) {
    if (st->cancelled.load()) return;
    auto on_event = [st](const TokenEvent& ev) { OnTokenEvent(*st, ev); };
    absl::StatusOr<int64_t> id = local ? e.Add(opts, on_event) : e.Reserve(opts, on_event);
    if (!id.ok()) {
      LOG(INFO) << "[" << st->request_id << "] refused: " << id.status();
      st->outbox.Close(ToGrpcStatus(id.status()));
      return;
    }
    st->seq_id = *id;
    if (local) {
      st->reserved_at = absl::Now();
      return;
    }
    ExpectKv(ctx, st, e, wait);
  });
  if (!posted) {
    state_->outbox.Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode worker stopping"));
  }
}

void DecodeCall::OnWriteDone(bool ok) { state_->outbox.WriteDone(ok); }

// Client cancelled or its deadline passed: stop the receiver first (no
// byte lands after this), then end the sequence, which frees its blocks.
void DecodeCall::OnCancel() {
  std::shared_ptr<State> st = state_;
  st->cancelled.store(true);
  DecodeContext* ctx = ctx_;
  ctx->loop->Post([ctx, st](Engine& e) {
    if (st->seq_id == 0) return;
    if (st->awaiting_kv) ctx->receiver->Cancel(static_cast<uint64_t>(st->seq_id));
    st->awaiting_kv = false;
    e.Cancel(st->seq_id);
  });
  st->outbox.Close(grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled"));
}

void DecodeCall::OnDone() {
  state_->outbox.Detach();
  delete this;
}

}  // namespace pdserve
