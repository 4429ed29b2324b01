// DecodeCallState: what one Decode stream's handlers share (decode_call.h
// for the threads that touch it), and what KV migration
// (stream_migration.h) needs of it.
#ifndef PDSERVE_DECODE_WORKER_DECODE_CALL_STATE_H_
#define PDSERVE_DECODE_WORKER_DECODE_CALL_STATE_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "common/rpc/stream_outbox.h"

namespace pdserve::decode {

struct DecodeCallState {
  explicit DecodeCallState(grpc::ServerWriteReactor<grpc::ByteBuffer>* reactor) : outbox(reactor) {}

  StreamOutbox<grpc::ByteBuffer> outbox;  // serialized DecodeEvents
  std::atomic<bool> cancelled{false};
  std::string request_id;
  int32_t prompt_len = 0;
  int32_t max_tokens = 0;  // this stream's, after first_index
  bool accepts_migration = false;
  absl::Time start = absl::Now();
  // Engine thread only.
  int64_t seq_id = 0;
  bool awaiting_kv = false;
  // The KV reservation, kept across epochs: a failed epoch re-arms the same
  // blocks under epoch + 1 instead of giving them up (docs/protocol/kv-wire.md,
  // "Prefill retry").
  std::vector<int32_t> kv_blocks;
  uint64_t epoch = 0;
  // A sequence cancelled while its KV was still coming: its blocks, taken
  // from the engine, go back to the pool when the receiver is done with the
  // epoch (OnKvDone), not before (a device channel may still be writing).
  std::vector<int32_t> blocks_after_kv;
  absl::Duration kv_wait;  // per epoch
  absl::Status error;      // why the engine sequence was cancelled, if we did it
  absl::Time reserved_at, committed_at;
  uint64_t kv_bytes = 0;
  int32_t local_cached_tokens = 0;  // local prefill: prompt tokens from the prefix cache
  double first_step_ms = 0;
  // Tokens emitted by this stream, and when the first was: its measured
  // pace, which tells a drain whether the rest fits in the window.
  int32_t emitted = 0;
  // Back pressure: the sequence sits out of the batch while the router
  // does not take its tokens (engine thread only).
  bool paused = false;
  absl::Time first_emitted_at;
  // KV migration: offered (the sequence left the engine, `detached` holds
  // its KV until a Handoff or the offer lapses), being sent, or over.
  enum class Migration { kNone, kOffered, kSending, kOver };
  Migration migration = Migration::kNone;
  Engine::Detached detached;
  absl::Time offered_at;
};

}  // namespace pdserve::decode

#endif  // PDSERVE_DECODE_WORKER_DECODE_CALL_STATE_H_
