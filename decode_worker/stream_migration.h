// Stream migration, source side: how a decode worker hands a running
// stream, with its KV, to another decode worker
// (docs/protocol/request-state-machine.md, "KV migration").
//
// Offer (a drain, or the router asking: OfferMigration): the sequence
// leaves the engine between two steps (Engine::Detach) with its blocks,
// and the stream sends Migrating. The router reserves
// blocks on a target, as for a prefill, and calls Handoff with the target's
// KvTarget: the blocks go out over the KV data plane (the prefill worker's
// frames, epochs and auth; int8 as stored; the target's cached prefix and a
// window layer's blocks before its last window are not sent) and the commit
// carries the last emitted token, which the target feeds first. The blocks
// come back to the pool once the push is over, whatever its outcome; the
// stream then ends (ABORTED "migrated", or UNAVAILABLE: the router
// recomputes). An offer with no Handoff within ctx->offer_wait lapses the
// same way, and a cancelled stream's offer is withdrawn.
//
// Threads: all but HandoffStream run on the engine thread; HandoffStream
// posts there, and the push runs on ctx->handoffs.
#ifndef PDSERVE_DECODE_WORKER_STREAM_MIGRATION_H_
#define PDSERVE_DECODE_WORKER_STREAM_MIGRATION_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "decode_worker/decode_call_state.h"
#include "decode_worker/decode_context.h"
#include "pdserve/v1/worker.pb.h"

namespace pdserve::decode {

// Whether a stream that emitted `emitted` of its `max_tokens`, the first
// at `first_emitted_at`, would emit the rest by `deadline` at the pace it
// has kept. One token gives no pace: it is assumed not to finish.
bool FinishesBy(int32_t emitted, absl::Time first_emitted_at, int32_t max_tokens, absl::Time now,
                absl::Time deadline);

// Offers the decoding streams that accept migration: every one (`all`),
// or those whose own pace so far would not emit their remaining tokens
// by `deadline`.
void OfferMigrations(DecodeContext* ctx, Engine& engine, absl::Time deadline, bool all);

// Offers one stream if it can move (accepts migration, decodes): a drain
// that moves every stream calls it as soon as a stream has its first
// token, before it takes a step here.
void OfferStream(DecodeContext* ctx, Engine& engine, const std::shared_ptr<DecodeCallState>& st);

// Lapses offers that waited ctx->offer_wait for their Handoff.
void ExpireOffers(DecodeContext* ctx, Engine& engine);

// The stream was cancelled: an offer not yet being sent gives its blocks
// back (a push in flight does when it ends).
void WithdrawOffer(DecodeContext* ctx, Engine& engine, DecodeCallState& st);

// DecodeWorker.OfferMigration: offers the stream of `req.request_id` now
// (the router rebalances); `done` runs once, on the engine thread.
void OfferRequestedStream(DecodeContext* ctx, const v1::OfferMigrationRequest& req,
                          std::function<void(absl::Status)> done);

// DecodeWorker.Handoff; `done` runs once, on the engine or a lane thread.
void HandoffStream(DecodeContext* ctx, const v1::HandoffRequest& req,
                   std::function<void(absl::StatusOr<v1::HandoffResponse>)> done);

}  // namespace pdserve::decode

#endif  // PDSERVE_DECODE_WORKER_STREAM_MIGRATION_H_
