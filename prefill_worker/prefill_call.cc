#include "prefill_worker/prefill_call.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grammar/tokenizer_vocab.h"
#include "common/request/sampling_proto.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/raw_message.h"
#include "common/worker/worker_proto.h"
#include "glog/logging.h"

namespace pdserve::prefill {

struct PrefillCall::State {
  State(PrefillCall* r, grpc::ByteBuffer* resp) : reactor(r), response(resp) {}

  // Finishes the RPC once; later calls are ignored.
  void Finish(const absl::Status& s, const std::function<void(v1::PrefillResponse*)>& fill) {
    ReleaseAdmission();
    absl::MutexLock lock(&mu);
    if (reactor == nullptr || finished) return;
    finished = true;
    if (s.ok() && fill) {
      v1::PrefillResponse answer;
      fill(&answer);
      *response = SerializeRawMessage(answer);
    }
    if (!s.ok()) LOG(INFO) << "[" << request_id << "] prefill failed: " << s;
    reactor->Finish(ToGrpcStatus(s));
  }
  void Detach() {
    absl::MutexLock lock(&mu);
    reactor = nullptr;
  }
  // The prompt no longer waits for compute: prefilled, failed or cancelled.
  void ReleaseAdmission() {
    if (admission != nullptr && !released.exchange(true)) admission->Release(admitted_tokens);
  }

  absl::Mutex mu;
  PrefillCall* reactor ABSL_GUARDED_BY(mu);
  grpc::ByteBuffer* response ABSL_GUARDED_BY(mu);  // a serialized PrefillResponse
  bool finished ABSL_GUARDED_BY(mu) = false;
  std::atomic<bool> cancelled{false};
  PrefillAdmission* admission = nullptr;  // set once admitted
  int64_t admitted_tokens = 0;
  std::atomic<bool> released{false};
  std::string request_id;
  absl::Time posted = absl::Now();
  // Engine thread only.
  int64_t seq_id = 0;
  int32_t cached_tokens = 0;  // prompt tokens taken from the prefix cache
  absl::Time started, computed;
};

namespace {

using State = PrefillCall::State;

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

absl::Status ValidateTarget(const PrefillContext& ctx, const v1::PrefillRequest& req) {
  if (req.prompt_tokens_size() == 0) return absl::InvalidArgumentError("prompt_tokens is empty");
  const v1::KvTarget& t = req.target();
  if (t.kv_endpoint().empty()) return absl::InvalidArgumentError("target.kv_endpoint is empty");
  if (!t.has_kv_layout()) return absl::InvalidArgumentError("target.kv_layout is missing");
  const KvLayout theirs = FromProto(t.kv_layout());
  if (theirs.dtype != ctx.layout.dtype) {
    return absl::FailedPreconditionError(
        absl::StrCat("kv dtype mismatch: decode worker stores ", theirs.dtype,
                     " KV, prefill worker ", ctx.layout.dtype, " (--kv_dtype must match)"));
  }
  if (!(theirs == ctx.layout)) {
    return absl::FailedPreconditionError(absl::StrCat("kv layout mismatch: decode worker ",
                                                      theirs.DebugString(), ", prefill worker ",
                                                      ctx.layout.DebugString()));
  }
  const uint32_t bs = static_cast<uint32_t>(ctx.layout.block_size);
  if (t.skip_prefix_tokens() % bs != 0 ||
      t.skip_prefix_tokens() >= static_cast<uint32_t>(req.prompt_tokens_size())) {
    return absl::InvalidArgumentError(
        "target.skip_prefix_tokens must be whole blocks of the prompt");
  }
  return absl::OkStatus();
}

absl::Time RpcDeadline(grpc::CallbackServerContext* rpc) {
  const absl::Time d = absl::FromChrono(rpc->deadline());
  const absl::Time cap = absl::Now() + absl::Seconds(120);
  return d < cap ? d : cap;
}

// Engine thread, after the step that sampled the first token: the blocks
// are now held; hand them to the exporter for the commit, which also
// carries the token's logprobs when the request asked for them.
void StartCommit(PrefillContext* ctx, const std::shared_ptr<State>& st, Engine& e,
                 int32_t first_token, std::optional<TokenLogprobs> first_logprobs) {
  std::vector<int32_t> blocks = e.TakeHeldBlocks(st->seq_id);
  const double queue_ms = Ms(st->started - st->posted);
  const double compute_ms = Ms(st->computed - st->started);
  const uint32_t cached = static_cast<uint32_t>(st->cached_tokens);
  ctx->exporter->Finish(
      st->seq_id, first_token, std::move(first_logprobs), std::move(blocks),
      [st, first_token, queue_ms, compute_ms, cached](absl::StatusOr<KvExportResult> r) {
        st->Finish(r.status(), [&](v1::PrefillResponse* resp) {
          resp->set_first_token(first_token);
          resp->set_queue_ms(queue_ms);
          resp->set_compute_ms(compute_ms);
          resp->set_kv_transfer_ms(Ms(r->transfer));
          resp->set_kv_transfer_bytes(r->bytes);
          resp->set_cached_prompt_tokens(cached);
        });
      });
}

void OnTokenEvent(PrefillContext* ctx, const std::shared_ptr<State>& st, const TokenEvent& ev) {
  if (ev.finish == FinishReason::kCancelled) {
    // Cancelled, or its step failed: the transfer is aborted and the held
    // blocks freed after it, once the step is over (this runs inside it).
    ctx->loop->Post([ctx, st](Engine& e) {
      ctx->exporter->Cancel(e, st->seq_id, "prefill ended before its first token");
    });
    st->Finish(absl::CancelledError("prefill cancelled"), nullptr);
    return;
  }
  if (ev.token < 0) return;
  st->computed = absl::Now();
  st->ReleaseAdmission();
  const int32_t token = ev.token;
  ctx->loop->Post([ctx, st, token, logprobs = ev.logprobs](Engine& e) mutable {
    StartCommit(ctx, st, e, token, std::move(logprobs));
  });
}

}  // namespace

PrefillCall::PrefillCall(PrefillContext* ctx, grpc::CallbackServerContext* rpc,
                         const v1::PrefillRequest& req, grpc::ByteBuffer* resp)
    : ctx_(ctx), state_(std::make_shared<State>(this, resp)) {
  state_->request_id = req.request_id();
  if (ctx->draining.load()) {
    state_->Finish(absl::UnavailableError("prefill worker is draining"), nullptr);
    return;
  }
  if (absl::Status s = ValidateTarget(*ctx, req); !s.ok()) {
    state_->Finish(s, nullptr);
    return;
  }
  SequenceOptions o;
  o.prompt.assign(req.prompt_tokens().begin(), req.prompt_tokens().end());
  o.sampling = FromProto(req.sampling());
  o.max_tokens = 1;
  o.ignore_eos = true;
  o.hold_kv_on_finish = true;
  // Compiled here, on the RPC thread: the engine thread only masks.
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> grammar =
      CompileConstraint(*ctx->grammars, o.sampling.constraint);
  if (!grammar.ok()) {
    LOG(WARNING) << "prefill " << req.request_id() << ": " << grammar.status();
    state_->Finish(grammar.status(), nullptr);
    return;
  }
  o.grammar = *std::move(grammar);
  KvTransferTarget target{req.target().kv_endpoint(), req.target().transfer_id(),
                          req.target().epoch(), RpcDeadline(rpc)};
  KvPeerOffer offer{{req.target().kv_transports().begin(), req.target().kv_transports().end()},
                    req.target().kv_host_id()};
  // A decode worker that refused our pool before: auto falls back to tcp.
  if (ctx->kv_transport == KvTransportFlag::kAuto && ctx->sender != nullptr &&
      ctx->sender->CudaIpcRefused(target.endpoint)) {
    offer.transports = {kKvTransportTcp};
  }
  absl::StatusOr<KvPath> path = ChooseKvPath(ctx->kv_transport, ctx->kv_local, offer);
  if (!path.ok()) {
    LOG(WARNING) << "prefill " << req.request_id() << ": " << path.status();
    state_->Finish(path.status(), nullptr);
    return;
  }
  target.path = *path;
  // Last: every refusal above is cheaper to give than a queue estimate.
  const int64_t prompt_len = req.prompt_tokens_size();
  const absl::Time now = absl::Now();
  absl::Time start_by = absl::FromChrono(rpc->deadline());
  if (req.start_within_ms() > 0) {
    start_by = std::min(start_by, now + absl::Milliseconds(req.start_within_ms()));
  }
  if (absl::Status s =
          ctx->admission.Admit(prompt_len, ctx->loop->load().prefill_tokens_per_s, now, start_by);
      !s.ok()) {
    LOG(WARNING) << "prefill " << req.request_id() << " refused: " << s.message();
    state_->Finish(s, nullptr);
    return;
  }
  state_->admission = &ctx->admission;
  state_->admitted_tokens = prompt_len;
  const int32_t skip_blocks =
      static_cast<int32_t>(req.target().skip_prefix_tokens()) / ctx->layout.block_size;
  std::shared_ptr<State> st = state_;
  const bool posted = ctx->loop->Post([ctx, st, o = std::move(o), target, skip_blocks](Engine& e) {
    if (st->cancelled.load()) return;
    st->started = absl::Now();
    const int32_t prompt_len = static_cast<int32_t>(o.prompt.size());
    absl::StatusOr<int64_t> id =
        e.Add(o, [ctx, st](const TokenEvent& ev) { OnTokenEvent(ctx, st, ev); });
    if (!id.ok()) {
      st->Finish(id.status(), nullptr);
      return;
    }
    st->seq_id = *id;
    st->cached_tokens = e.CachedTokensOf(*id);
    ctx->exporter->Register(*id, target, prompt_len, skip_blocks,
                            st->cached_tokens / ctx->layout.block_size, e.BlocksOf(*id));
  });
  if (!posted) state_->Finish(absl::UnavailableError("prefill worker stopping"), nullptr);
}

// The sequence ends now, but its blocks go back to the pool only once the
// exporter's abort returned: the sender must not read a block after it is
// reused, and the engine thread must not wait for the sender.
void PrefillCall::OnCancel() {
  std::shared_ptr<State> st = state_;
  st->cancelled.store(true);
  PrefillContext* ctx = ctx_;
  ctx->loop->Post([ctx, st](Engine& e) {
    if (st->seq_id == 0) return;
    ctx->exporter->Cancel(e, st->seq_id, "prefill cancelled by the router");
  });
  st->Finish(absl::CancelledError("prefill cancelled by the client"), nullptr);
}

void PrefillCall::OnDone() {
  state_->Detach();
  delete this;
}

}  // namespace pdserve::prefill
