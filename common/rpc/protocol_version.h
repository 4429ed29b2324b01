// The control-plane protocol version workers publish in WorkerInfo; the
// router pairs only workers that agree on it. Bump on incompatible changes
// to worker.proto or kv_frame.proto semantics.
#ifndef PDSERVE_COMMON_RPC_PROTOCOL_VERSION_H_
#define PDSERVE_COMMON_RPC_PROTOCOL_VERSION_H_

#include <cstdint>

namespace pdserve {

// 2: LoadReport.prefill_progress, PrefillRequest.start_within_ms and the
// PROGRESS frame (progress-based prefill and KV waits).
inline constexpr uint32_t kProtocolVersion = 2;

// The longest KV wait a decode worker grants a reservation
// (DecodeRequest.kv_wait_ms is capped to it).
inline constexpr int64_t kMaxKvWaitMs = 60000;

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RPC_PROTOCOL_VERSION_H_
