#include "decode_worker/decode_call.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grammar/tokenizer_vocab.h"
#include "common/request/sampling_proto.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/raw_message.h"
#include "common/rpc/stream_outbox.h"
#include "common/worker/worker_proto.h"
#include "decode_worker/decode_call_state.h"
#include "decode_worker/stream_migration.h"
#include "glog/logging.h"

namespace pdserve::decode {

namespace {

using State = DecodeCallState;

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
  t->set_prefill_cached_tokens(static_cast<uint32_t>(st.local_cached_tokens));
  st.outbox.Push(SerializeRawMessage(out));
  st.outbox.Close(grpc::Status::OK);
}

// A stream this many events behind its reader pauses its sequence (out of
// the batch, blocks kept); it resumes once the reader is this close again.
// The router reads only as fast as its client (docs/protocol/
// request-state-machine.md), so a client that stops reading stops the
// decoding.
constexpr size_t kPauseBacklog = 16;
constexpr size_t kResumeBacklog = 2;

// Engine thread: pauses `st`'s sequence when its stream lags; the write
// that catches up resumes it (through the engine thread).
void PauseIfBehind(DecodeContext* ctx, const std::shared_ptr<State>& st) {
  if (st->paused || st->outbox.backlog() < kPauseBacklog) return;
  st->paused = true;
  ctx->loop->Post([st](Engine& e) { e.SetPaused(st->seq_id, st->paused); });
  VLOG(1) << "[" << st->request_id << "] reader lags: sequence paused";
  st->outbox.OnDrained(kResumeBacklog, [ctx, weak = std::weak_ptr<State>(st)] {
    ctx->loop->Post([weak](Engine& e) {
      std::shared_ptr<State> s = weak.lock();
      if (s == nullptr || !s->paused) return;
      s->paused = false;
      e.SetPaused(s->seq_id, false);
      VLOG(1) << "[" << s->request_id << "] reader caught up: sequence resumed";
    });
  });
}

// Engine thread: one sampled token and/or the end of the sequence.
void OnTokenEvent(DecodeContext* ctx, State& st, const TokenEvent& ev) {
  if (ev.token >= 0) {
    if (ev.index == 1 && st.committed_at != absl::Time()) {
      st.first_step_ms = Ms(absl::Now() - st.committed_at);
    }
    if (st.emitted++ == 0) st.first_emitted_at = absl::Now();
    v1::DecodeEvent out;
    v1::Tokens* tokens = out.mutable_tokens();
    tokens->add_ids(ev.token);
    tokens->set_first_index(ev.index);
    // One event per token, so `logprobs` stays parallel to `ids`.
    if (ev.logprobs.has_value()) *tokens->add_logprobs() = ToProto(*ev.logprobs);
    st.outbox.Push(SerializeRawMessage(out));
  }
  if (ev.finish == FinishReason::kNone) return;
  ctx->streams.erase(st.seq_id);
  if (ev.finish == FinishReason::kCancelled) {
    st.outbox.Close(
        ToGrpcStatus(st.error.ok() ? absl::CancelledError("request cancelled") : st.error));
    return;
  }
  SendFinished(st, ev);
}

absl::Status ArmKv(DecodeContext* ctx, const std::shared_ptr<State>& st, absl::Time deadline);

// The sequence no longer waits for KV: forget it for RetryTransfer.
void StopAwaitingKv(DecodeContext* ctx, State& st) {
  st.awaiting_kv = false;
  ctx->awaiting_kv.erase(static_cast<uint64_t>(st.seq_id));
}

// A failed epoch whose blocks are worth keeping: its prefill worker gave up
// or broke the transfer, and the router may retry on another one. Deadlines
// and cancellation end the reservation instead.
bool KeepReservation(const absl::Status& s) {
  return !absl::IsDeadlineExceeded(s) && !absl::IsCancelled(s);
}

// Engine thread: the receiver finished epoch `epoch` of the transfer (or
// gave up on it).
void OnKvDone(DecodeContext* ctx, Engine& engine, const std::shared_ptr<State>& st, uint64_t epoch,
              const absl::StatusOr<KvCommit>& commit) {
  State& s = *st;
  if (epoch != s.epoch) return;  // an epoch that a retry superseded
  if (!s.blocks_after_kv.empty()) {
    engine.FreeBlocks(std::exchange(s.blocks_after_kv, {}));
    return;
  }
  if (!s.awaiting_kv) return;  // already cancelled
  if (!commit.ok() && KeepReservation(commit.status())) {
    // Re-arm under the next epoch for one more wait, so the reservation
    // stays bounded if no retry comes (no frame of the new epoch can come
    // without one); a retry re-arms again with a fresh wait. Not within the
    // failed epoch's first deadline: a long prompt may have streamed well
    // past it before its prefill worker failed.
    LOG(INFO) << "[" << s.request_id << "] kv transfer epoch " << epoch
              << " failed: " << commit.status() << "; keeping the reservation for a retry";
    const absl::Status armed = ArmKv(ctx, st, absl::Now() + s.kv_wait);
    if (armed.ok()) return;
  }
  StopAwaitingKv(ctx, s);
  if (!commit.ok()) {
    LOG(WARNING) << "[" << s.request_id << "] kv transfer failed: " << commit.status();
    s.error = commit.status();
    engine.Cancel(s.seq_id);
    return;
  }
  s.committed_at = absl::Now();
  s.kv_bytes = commit->total_bytes;
  ctx->kv_bytes_received.fetch_add(commit->total_bytes, std::memory_order_relaxed);
  absl::Status c =
      engine.CommitPrefilled(s.seq_id, commit->first_token, commit->first_token_logprobs);
  if (!c.ok()) {
    LOG(WARNING) << "[" << s.request_id << "] commit rejected: " << c;
    s.outbox.Close(ToGrpcStatus(c));
    return;
  }
  if (ctx->draining.load() && ctx->drain_moves_all) OfferStream(ctx, engine, st);
}

// Engine thread: registers the reserved blocks with the receiver under the
// next epoch; a pending older epoch is superseded (its frames are dropped).
absl::Status ArmKv(DecodeContext* ctx, const std::shared_ptr<State>& st, absl::Time deadline) {
  const uint64_t epoch = st->epoch + 1;
  EngineLoop* loop = ctx->loop;
  absl::Status s = ctx->receiver->Expect(
      static_cast<uint64_t>(st->seq_id), epoch, st->kv_blocks, ctx->layout.n_layers, deadline,
      [ctx, st, loop, epoch](absl::StatusOr<KvCommit> r) {
        loop->Post([ctx, st, epoch, r](Engine& e) { OnKvDone(ctx, e, st, epoch, r); });
      });
  if (s.ok()) st->epoch = epoch;
  return s;
}

SequenceOptions ToSequenceOptions(const v1::DecodeRequest& req) {
  SequenceOptions o;
  o.prompt.assign(req.prompt_tokens().begin(), req.prompt_tokens().end());
  o.sampling = FromProto(req.sampling());
  o.max_tokens = req.max_tokens();
  o.ignore_eos = req.ignore_eos();
  o.first_index = req.first_index();
  o.migrated = req.migrated();
  return o;
}

// Engine thread: registers the reserved blocks with the receiver and tells
// the router where to send the KV.
void ExpectKv(DecodeContext* ctx, const std::shared_ptr<State>& st, Engine& engine,
              absl::Duration wait) {
  const uint64_t transfer_id = static_cast<uint64_t>(st->seq_id);
  // Only the prompt's blocks receive KV; the rest are for generated tokens.
  std::vector<int32_t> blocks = engine.BlocksOf(st->seq_id);
  blocks.resize(
      std::min<size_t>(blocks.size(), BlocksForTokens(st->prompt_len, ctx->layout.block_size)));
  // Delta transfer: the prefix this worker already holds is not sent.
  const int32_t cached_tokens = engine.CachedTokensOf(st->seq_id);
  std::fill_n(blocks.begin(), cached_tokens / ctx->layout.block_size, kKvBlockNotSent);
  st->kv_blocks = blocks;
  st->kv_wait = wait;
  st->reserved_at = absl::Now();
  absl::Status s = ArmKv(ctx, st, st->reserved_at + wait);
  if (!s.ok()) {
    st->error = s;
    engine.Cancel(st->seq_id);
    return;
  }
  st->awaiting_kv = true;
  ctx->awaiting_kv[transfer_id] = st;
  v1::DecodeEvent out;
  v1::Reserved* r = out.mutable_reserved();
  r->set_transfer_id(transfer_id);
  r->set_epoch(st->epoch);
  r->set_kv_endpoint(ctx->kv_endpoint);
  *r->mutable_kv_layout() = ToProto(ctx->layout);
  r->set_num_blocks(static_cast<uint32_t>(blocks.size()));
  r->set_cached_prefix_tokens(static_cast<uint32_t>(cached_tokens));
  for (const std::string& t : ctx->kv_transports) r->add_kv_transports(t);
  r->set_kv_host_id(ctx->kv_host_id);
  st->outbox.Push(SerializeRawMessage(out));
}

}  // namespace

DecodeCall::DecodeCall(DecodeContext* ctx, grpc::CallbackServerContext* rpc,
                       const v1::DecodeRequest& req)
    : ctx_(ctx), state_(std::make_shared<State>(this)) {
  state_->request_id = req.request_id();
  state_->prompt_len = req.prompt_tokens_size();
  state_->max_tokens = req.max_tokens();
  state_->accepts_migration = req.accepts_migration();
  if (ctx->draining.load()) {
    state_->outbox.Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode worker is draining"));
    return;
  }
  absl::Duration wait =
      req.kv_wait_ms() > 0 ? absl::Milliseconds(req.kv_wait_ms()) : ctx->default_kv_wait;
  wait = std::min(wait, ctx->max_kv_wait);
  const bool local = req.local_prefill();
  std::shared_ptr<State> st = state_;
  SequenceOptions opts = ToSequenceOptions(req);
  // Compiled here, on the RPC thread (overlapping the prefill worker's
  // work): the engine thread only masks, and replays the tokens made so far.
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> grammar =
      CompileConstraint(*ctx->grammars, opts.sampling.constraint);
  if (!grammar.ok()) {
    LOG(WARNING) << "[" << state_->request_id << "] " << grammar.status();
    state_->outbox.Close(ToGrpcStatus(grammar.status()));
    return;
  }
  opts.grammar = *std::move(grammar);
  const bool posted = ctx->loop->Post([ctx, st, opts = std::move(opts), local, wait](Engine& e) {
    if (st->cancelled.load()) return;
    auto on_event = [ctx, st](const TokenEvent& ev) {
      OnTokenEvent(ctx, *st, ev);
      if (ev.finish == FinishReason::kNone) PauseIfBehind(ctx, st);
    };
    absl::StatusOr<int64_t> id = local ? e.Add(opts, on_event) : e.Reserve(opts, on_event);
    if (!id.ok()) {
      LOG(INFO) << "[" << st->request_id << "] refused: " << id.status();
      st->outbox.Close(ToGrpcStatus(id.status()));
      return;
    }
    st->seq_id = *id;
    ctx->streams[*id] = st;
    if (local) {
      st->reserved_at = absl::Now();
      st->local_cached_tokens = e.CachedTokensOf(*id);
      return;
    }
    ExpectKv(ctx, st, e, wait);
  });
  if (!posted) {
    state_->outbox.Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode worker stopping"));
  }
}

void DecodeCall::OnWriteDone(bool ok) { state_->outbox.WriteDone(ok); }

// Client cancelled or its deadline passed: end the sequence. While its KV
// is still coming, the receiver may go on writing into its blocks after
// Cancel returns (a device channel finishing a receive), so the blocks wait
// for the epoch's OnKvDone, which runs exactly once after it.
void DecodeCall::OnCancel() {
  std::shared_ptr<State> st = state_;
  st->cancelled.store(true);
  DecodeContext* ctx = ctx_;
  ctx->loop->Post([ctx, st](Engine& e) {
    if (st->seq_id == 0) return;
    if (st->migration != State::Migration::kNone) {
      WithdrawOffer(ctx, e, *st);  // a handoff in flight keeps its blocks
      return;
    }
    if (!st->awaiting_kv) {
      e.Cancel(st->seq_id);
      return;
    }
    StopAwaitingKv(ctx, *st);
    st->blocks_after_kv = e.CancelAndTakeBlocks(st->seq_id);
    ctx->receiver->Cancel(static_cast<uint64_t>(st->seq_id));
  });
  st->outbox.Close(grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled"));
}

void RetryDecodeTransfer(DecodeContext* ctx, const v1::RetryTransferRequest& req,
                         std::function<void(absl::StatusOr<uint64_t>)> done) {
  const uint64_t id = req.transfer_id();
  const std::string request_id = req.request_id();
  auto run = [ctx, id, request_id, done](Engine&) {
    auto it = ctx->awaiting_kv.find(id);
    std::shared_ptr<State> st = it == ctx->awaiting_kv.end() ? nullptr : it->second.lock();
    if (st == nullptr || !st->awaiting_kv || st->request_id != request_id) {
      done(absl::NotFoundError(
          absl::StrCat("no reservation of request ", request_id, " waits for KV transfer ", id)));
      return;
    }
    const absl::Status s = ArmKv(ctx, st, absl::Now() + st->kv_wait);
    if (!s.ok()) {
      done(s);
      return;
    }
    LOG(INFO) << "[" << request_id << "] kv transfer " << id << " re-armed under epoch "
              << st->epoch;
    done(st->epoch);
  };
  if (!ctx->loop->Post(run)) done(absl::UnavailableError("decode worker stopping"));
}

void DecodeCall::OnDone() {
  state_->outbox.Detach();
  delete this;
}

}  // namespace pdserve::decode
