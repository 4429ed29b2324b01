// FramedKvSender: the prefill worker's end of the TCP KV data plane
// (docs/protocol/kv-wire.md). It keeps one persistent
// connection per receiver endpoint and path (tcp, cuda_ipc), shared by all
// transfers to it and reopened after a failure, and runs all socket I/O on
// its own thread:
// SendLayer only validates, encodes a header and queues; the bytes are
// written later straight from the caller's KvCache blocks.
//
// Thread-safety and memory contract: as KvSender. Do not destroy the sender
// while a call on it is in progress.
#ifndef PDSERVE_COMMON_KV_FRAMED_KV_SENDER_H_
#define PDSERVE_COMMON_KV_FRAMED_KV_SENDER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/kv/kv_auth.h"
#include "common/kv/kv_transport.h"
#include "common/tls/reloading_tls_context.h"

namespace pdserve {

struct FramedKvSenderOptions {
  absl::Duration connect_timeout = absl::Seconds(5);
  // A connection with a frame on the wire or a commit awaiting its ack that
  // makes no progress this long is reset (its transfers fail UNAVAILABLE).
  absl::Duration idle_timeout = absl::Seconds(10);
  // Frames queued per endpoint before SendLayer says RESOURCE_EXHAUSTED.
  // Frames hold pointers, not copies, so this bounds latency, not memory.
  int max_queued_frames = 1024;
  // SO_SNDBUF of each connection; 0 keeps the kernel's autotuning. A
  // buffer that holds a whole layer frame lets one sendmsg take it.
  int socket_buffer_bytes = 0;
  // Prove the shared KV secret to each receiver, and check that it holds
  // it, before sending (kv_auth.h). Null = no authentication.
  std::shared_ptr<const KvAuthKey> auth;
  // Mutual TLS on every connection (kv_stream.h, --kv_tls); null = plain.
  std::shared_ptr<ReloadingTlsContext> tls;
  // The device KV pool that kCudaIpc and kNccl transfers read from. CUDA
  // IPC: it is exported once and attached on each such connection; layer
  // frames then carry block ids instead of bytes, and the receiver pulls.
  // NCCL: each such connection opens its own channel (NCCL_HELLO, joined as
  // rank 0 by the first SendLayer to that endpoint, which waits for the
  // receiver to join) and layers' bytes go over it in frame order. Null = no
  // device paths (such targets are refused).
  const KvCache* device_pool = nullptr;
};

class FramedKvSender : public KvSender {
 public:
  // INVALID_ARGUMENT for non-positive timeouts or queue length.
  static absl::StatusOr<std::unique_ptr<FramedKvSender>> Create(
      const FramedKvSenderOptions& options = {});
  // Fails every transfer still in flight and closes all connections.
  ~FramedKvSender() override = default;
  // True once `endpoint` refused our CUDA IPC attach (e.g. its GPU cannot
  // map ours): --kv_transport=auto then sends it tcp from then on.
  virtual bool CudaIpcRefused(const std::string& endpoint) const = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_FRAMED_KV_SENDER_H_
