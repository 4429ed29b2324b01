// The requests the router sends to workers for one client request, built
// from the validated request and (for Prefill) the decode worker's
// reservation. Kept apart from the state machine so each field's origin is
// visible in one place.
#ifndef PDSERVE_ROUTER_CALL_WORKER_REQUESTS_H_
#define PDSERVE_ROUTER_CALL_WORKER_REQUESTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "pdserve/v1/worker.pb.h"
#include "router/call/request_validator.h"

namespace pdserve::router {

// `generated`: tokens already relayed to the client by a decode worker that
// failed (decode failover) or is moving the stream (a migration carries all
// but the last, whose KV its source has not computed). They extend the
// prompt, count against max_tokens, and the new stream's numbering starts
// after them. `accepts_migration`: the router handles Migrating. `migrated`:
// this stream is a migration's target (DecodeRequest.migrated).
v1::DecodeRequest MakeDecodeRequest(const std::string& request_id, const ValidatedRequest& request,
                                    bool local_prefill, uint32_t kv_wait_ms,
                                    const std::vector<int32_t>& generated = {},
                                    bool accepts_migration = false, bool migrated = false);

// Where KV goes for `reserved`: its endpoint (or the decode worker's
// advertised one when the reservation leaves it empty), transfer id, epoch,
// layout, accepted paths; the blocks it already caches are skipped.
v1::KvTarget MakeKvTarget(const v1::Reserved& reserved, const std::string& default_kv_endpoint);

// A migration (DecodeWorker.Handoff): the source pushes the offered
// stream's KV to the target's reservation.
v1::HandoffRequest MakeHandoffRequest(const std::string& request_id, uint64_t offer_id,
                                      const v1::Reserved& reserved,
                                      const std::string& default_kv_endpoint);

// The KV target is the reservation: its endpoint (or the decode worker's
// advertised one when the reservation leaves it empty), transfer id, epoch
// and layout; blocks the decode worker already caches are skipped.
v1::PrefillRequest MakePrefillRequest(const std::string& request_id,
                                      const ValidatedRequest& request, const v1::Reserved& reserved,
                                      const std::string& default_kv_endpoint);

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_WORKER_REQUESTS_H_
