// DecodeContext: what every Decode call of a decode worker shares — the
// model, the engine thread, the KV receiver and the worker's identity.
// Owned by DecodeWorker; outlives every call (the server is shut down
// before it is destroyed).
#ifndef PDSERVE_DECODE_WORKER_DECODE_CONTEXT_H_
#define PDSERVE_DECODE_WORKER_DECODE_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/time/time.h"
#include "common/base/job_lane.h"
#include "common/engine/engine_loop.h"
#include "common/engine/kv_cache.h"
#include "common/grammar/grammar_compiler.h"
#include "common/kv/framed_kv_sender.h"
#include "common/kv/kv_path.h"
#include "common/kv/kv_transport.h"
#include "common/model/model.h"
#include "common/rpc/protocol_version.h"

namespace pdserve::decode {

struct DecodeCallState;

struct DecodeContext {
  const Model* model = nullptr;
  GrammarCompiler* grammars = nullptr;  // structured output
  EngineLoop* loop = nullptr;
  KvReceiver* receiver = nullptr;
  KvCache* cache = nullptr;
  KvLayout layout;
  std::string worker_id;
  std::string kv_endpoint;
  // Reserved.kv_transports / kv_host_id: the KV paths this worker accepts.
  std::vector<std::string> kv_transports;
  std::string kv_host_id;
  absl::Duration default_kv_wait = absl::Seconds(10);
  absl::Duration max_kv_wait = absl::Milliseconds(kMaxKvWaitMs);
  std::atomic<bool> draining{false};
  // KV payload bytes of committed transfers (the metrics' counter).
  std::atomic<uint64_t> kv_bytes_received{0};
  // Streams whose reservation waits for KV, by transfer id, so that
  // RetryTransfer finds them. Engine thread only.
  std::unordered_map<uint64_t, std::weak_ptr<DecodeCallState>> awaiting_kv;

  // KV migration (stream_migration.h): the sender that pushes an offered
  // stream's KV to its target, this side's KV paths, and the lane its
  // pushes run on (they wait for the target's ack).
  FramedKvSender* sender = nullptr;
  KvLocalSide kv_local;
  JobLane* handoffs = nullptr;
  // A drain moves every stream (--drain_migration=all): a stream whose KV
  // commits while draining is offered at once, before it takes a step.
  bool drain_moves_all = false;
  // How long an offer waits for its Handoff, and a Handoff for its ack.
  absl::Duration offer_wait = absl::Seconds(10);
  absl::Duration handoff_timeout = absl::Seconds(30);
  // Every live stream with an engine sequence (or an offered one), by
  // sequence id. Engine thread only.
  std::unordered_map<int64_t, std::weak_ptr<DecodeCallState>> streams;
  // Open offers (and pushes) by offer id (the sequence id), held strongly:
  // their blocks are freed by CloseOffer whatever happens to the call.
  std::unordered_map<int64_t, std::shared_ptr<DecodeCallState>> offers;
  std::atomic<uint64_t> migrations_out{0};         // handed off
  std::atomic<uint64_t> migrations_out_failed{0};  // handoff failed or offer lapsed
};

}  // namespace pdserve::decode

#endif  // PDSERVE_DECODE_WORKER_DECODE_CONTEXT_H_
