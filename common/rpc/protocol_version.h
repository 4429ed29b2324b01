// The control-plane protocol version workers publish in WorkerInfo; the
// router pairs only workers that agree on it. Bump on incompatible changes
// to worker.proto or kv_frame.proto semantics.
#ifndef PDSERVE_COMMON_RPC_PROTOCOL_VERSION_H_
#define PDSERVE_COMMON_RPC_PROTOCOL_VERSION_H_

#include <cstdint>

namespace pdserve {

inline constexpr uint32_t kProtocolVersion = 1;

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RPC_PROTOCOL_VERSION_H_
