#include "decode_worker/stream_migration.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/raw_message.h"
#include "common/worker/worker_proto.h"
#include "glog/logging.h"

namespace pdserve::decode {
namespace {

using State = DecodeCallState;

void Offer(DecodeContext* ctx, Engine& engine, const std::shared_ptr<State>& st) {
  absl::StatusOr<Engine::Detached> d = engine.Detach(st->seq_id);
  if (!d.ok()) {
    VLOG(1) << "[" << st->request_id << "] not offered for migration: " << d.status();
    return;
  }
  st->detached = std::move(*d);
  st->migration = State::Migration::kOffered;
  st->offered_at = absl::Now();
  ctx->offers[st->seq_id] = st;
  v1::DecodeEvent out;
  out.mutable_migrating()->set_generated_tokens(st->detached.generated);
  out.mutable_migrating()->set_offer_id(static_cast<uint64_t>(st->seq_id));
  st->outbox.Push(SerializeRawMessage(out));
  LOG(INFO) << "[" << st->request_id << "] offered for migration after "
            << st->detached.generated << " tokens (" << st->detached.kv_tokens
            << " tokens of KV)";
}

// The offer is over: its blocks go back and the stream ends with `end`.
void CloseOffer(DecodeContext* ctx, Engine& engine, State& st, const grpc::Status& end) {
  engine.FreeBlocks(std::exchange(st.detached.blocks, {}));
  st.migration = State::Migration::kOver;
  st.outbox.Close(end);
  ctx->streams.erase(st.seq_id);
  ctx->offers.erase(st.seq_id);  // may drop the last reference: last
}

// The open offer `offer_id`, if it is `request_id`'s (a request id alone
// may name two streams: clients choose them).
std::shared_ptr<State> FindOffer(DecodeContext* ctx, const std::string& request_id,
                                 uint64_t offer_id) {
  auto it = ctx->offers.find(static_cast<int64_t>(offer_id));
  if (it == ctx->offers.end() || it->second->request_id != request_id ||
      it->second->migration != State::Migration::kOffered) {
    return nullptr;
  }
  return it->second;
}

struct PushResult {
  absl::Status status;
  uint64_t bytes = 0;
  absl::Duration took;
};

// Lane thread: the sequence's KV into the target's blocks, then the commit
// (which waits for the target's ack). The blocks stay the caller's.
PushResult PushKv(DecodeContext* ctx, const State& st, const KvTransferTarget& target,
                  int32_t skip_blocks) {
  const absl::Time began = absl::Now();
  const KvLayout& layout = ctx->layout;
  const Engine::Detached& d = st.detached;
  const int32_t n_blocks = BlocksForTokens(d.kv_tokens, layout.block_size);
  PushResult r;
  KvCache& cache = *ctx->cache;
  for (int layer = 0; layer < layout.n_layers && r.status.ok(); ++layer) {
    std::vector<int32_t> logical, physical;
    for (int32_t b = std::max(skip_blocks, layout.FirstSentBlock(layer, n_blocks)); b < n_blocks;
         ++b) {
      logical.push_back(b);
      physical.push_back(d.blocks[b]);
    }
    if (logical.empty()) continue;
    r.status = ctx->sender->SendLayer(target, layer, logical, cache, physical);
    r.bytes += logical.size() * static_cast<uint64_t>(layout.bytes_per_layer_block());
  }
  if (r.status.ok()) {
    KvCommit commit;
    commit.num_layers = layout.n_layers;
    commit.first_token = d.last_token;
    r.status = ctx->sender->Commit(target, commit);
  }
  if (!r.status.ok()) ctx->sender->Abort(target, std::string(r.status.message()));
  r.took = absl::Now() - began;
  return r;
}

// Engine thread: checks the target and starts the push.
absl::Status StartHandoff(DecodeContext* ctx, const std::shared_ptr<State>& st,
                          const v1::HandoffRequest& req,
                          std::function<void(absl::StatusOr<v1::HandoffResponse>)> done) {
  const v1::KvTarget& t = req.target();
  if (!(FromProto(t.kv_layout()) == ctx->layout)) {
    return absl::FailedPreconditionError("the target's KV layout differs from this worker's");
  }
  const int32_t bs = ctx->layout.block_size;
  const int32_t n_blocks = BlocksForTokens(st->detached.kv_tokens, bs);
  if (t.skip_prefix_tokens() % bs != 0 ||
      static_cast<int64_t>(t.skip_prefix_tokens() / bs) >= n_blocks) {
    return absl::InvalidArgumentError(absl::StrCat("skip_prefix_tokens ", t.skip_prefix_tokens(),
                                                   " is not a whole number of blocks below ",
                                                   n_blocks));
  }
  // TCP, or CUDA IPC on one node; not NCCL, whose channels (and network
  // policy) are set up between the prefill and decode tiers.
  KvPeerOffer offer{{}, t.kv_host_id()};
  for (const std::string& transport : t.kv_transports()) {
    if (transport != kKvTransportNccl) offer.transports.push_back(transport);
  }
  // Nothing else, or a target that refused our pool before: tcp.
  if (offer.transports.empty() || ctx->sender->CudaIpcRefused(t.kv_endpoint())) {
    offer.transports = {kKvTransportTcp};
  }
  absl::StatusOr<KvPath> path = ChooseKvPath(KvTransportFlag::kAuto, ctx->kv_local, offer);
  if (!path.ok()) return path.status();
  KvTransferTarget target{t.kv_endpoint(), t.transfer_id(), t.epoch(),
                          absl::Now() + ctx->handoff_timeout, *path};
  const int32_t skip_blocks = static_cast<int32_t>(t.skip_prefix_tokens() / bs);
  st->migration = State::Migration::kSending;
  ctx->handoffs->Post([ctx, st, target, skip_blocks, done = std::move(done)] {
    const PushResult r = PushKv(ctx, *st, target, skip_blocks);
    const bool posted = ctx->loop->Post([ctx, st, r, target](Engine& e) {
      if (r.status.ok()) {
        ctx->migrations_out.fetch_add(1);
        LOG(INFO) << "[" << st->request_id << "] migrated to " << target.endpoint << ": "
                  << r.bytes << " bytes of KV in " << absl::FormatDuration(r.took);
        CloseOffer(ctx, e, *st, grpc::Status(grpc::StatusCode::ABORTED, "migrated"));
        return;
      }
      ctx->migrations_out_failed.fetch_add(1);
      LOG(WARNING) << "[" << st->request_id << "] migration to " << target.endpoint
                   << " failed: " << r.status;
      CloseOffer(ctx, e, *st,
                 ToGrpcStatus(absl::UnavailableError(
                     absl::StrCat("migration failed: ", r.status.message()))));
    });
    if (!posted) LOG(WARNING) << "[" << st->request_id << "] worker stopping during migration";
    if (!r.status.ok()) {
      done(r.status);
      return;
    }
    v1::HandoffResponse answer;
    answer.set_kv_transfer_bytes(r.bytes);
    answer.set_kv_transfer_ms(absl::ToDoubleMilliseconds(r.took));
    done(answer);
  });
  return absl::OkStatus();
}

}  // namespace

bool FinishesBy(int32_t emitted, absl::Time first_emitted_at, int32_t max_tokens, absl::Time now,
                absl::Time deadline) {
  if (emitted < 2) return false;
  const absl::Duration per_token = (now - first_emitted_at) / (emitted - 1);
  return now + per_token * std::max(0, max_tokens - emitted) <= deadline;
}

void OfferMigrations(DecodeContext* ctx, Engine& engine, absl::Time deadline, bool all) {
  const absl::Time now = absl::Now();
  std::vector<std::shared_ptr<State>> chosen;
  for (auto& [id, weak] : ctx->streams) {
    std::shared_ptr<State> st = weak.lock();
    if (st != nullptr &&
        (all || !FinishesBy(st->emitted, st->first_emitted_at, st->max_tokens, now, deadline))) {
      chosen.push_back(std::move(st));
    }
  }
  for (const std::shared_ptr<State>& st : chosen) OfferStream(ctx, engine, st);
}

void OfferStream(DecodeContext* ctx, Engine& engine, const std::shared_ptr<DecodeCallState>& st) {
  if (!st->accepts_migration || st->migration != State::Migration::kNone ||
      st->cancelled.load() || st->awaiting_kv || st->emitted == 0) {
    return;
  }
  Offer(ctx, engine, st);
}

void ExpireOffers(DecodeContext* ctx, Engine& engine) {
  const absl::Time now = absl::Now();
  std::vector<std::shared_ptr<State>> lapsed;
  for (auto& [id, st] : ctx->offers) {
    if (st->migration == State::Migration::kOffered && now - st->offered_at >= ctx->offer_wait) {
      lapsed.push_back(st);
    }
  }
  for (const std::shared_ptr<State>& st : lapsed) {
    LOG(WARNING) << "[" << st->request_id << "] migration offer lapsed without a handoff";
    ctx->migrations_out_failed.fetch_add(1);
    CloseOffer(ctx, engine, *st,
               grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the stream's migration offer lapsed: nothing took it"));
  }
}

void WithdrawOffer(DecodeContext* ctx, Engine& engine, DecodeCallState& st) {
  if (st.migration != State::Migration::kOffered) return;
  CloseOffer(ctx, engine, st, grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled"));
}

void OfferRequestedStream(DecodeContext* ctx, const v1::OfferMigrationRequest& req,
                          std::function<void(absl::Status)> done) {
  auto run = [ctx, req, done](Engine& e) {
    std::shared_ptr<State> st;
    int matches = 0;
    for (auto& [id, weak] : ctx->streams) {
      std::shared_ptr<State> s = weak.lock();
      if (s != nullptr && s->request_id == req.request_id()) {
        st = std::move(s);
        ++matches;
      }
    }
    if (st == nullptr) {
      done(absl::NotFoundError(absl::StrCat("no stream of request ", req.request_id(), " runs here")));
      return;
    }
    if (matches > 1) {  // clients choose request ids: never move the wrong one
      done(absl::FailedPreconditionError(
          absl::StrCat(matches, " streams of request ", req.request_id(), " run here")));
      return;
    }
    if (st->migration == State::Migration::kNone) OfferStream(ctx, e, st);
    if (st->migration != State::Migration::kOffered) {
      done(absl::FailedPreconditionError(absl::StrCat(
          "the stream of request ", req.request_id(),
          st->accepts_migration ? " cannot move now (no token yet, or already moving)"
                                : " does not accept migration")));
      return;
    }
    done(absl::OkStatus());
  };
  if (!ctx->loop->Post(std::move(run))) done(absl::UnavailableError("decode worker stopping"));
}

void HandoffStream(DecodeContext* ctx, const v1::HandoffRequest& req,
                   std::function<void(absl::StatusOr<v1::HandoffResponse>)> done) {
  auto run = [ctx, req, done](Engine&) mutable {
    std::shared_ptr<State> st = FindOffer(ctx, req.request_id(), req.offer_id());
    if (st == nullptr) {
      done(absl::NotFoundError(absl::StrCat("no migration offer ", req.offer_id(), " of request ",
                                            req.request_id(), " is open")));
      return;
    }
    std::function<void(absl::StatusOr<v1::HandoffResponse>)> reply = done;
    if (absl::Status s = StartHandoff(ctx, st, req, std::move(done)); !s.ok()) {
      LOG(WARNING) << "[" << req.request_id() << "] handoff refused: " << s;
      reply(s);  // the offer stays open for another target until it lapses
    }
  };
  if (!ctx->loop->Post(std::move(run))) done(absl::UnavailableError("decode worker stopping"));
}

}  // namespace pdserve::decode
