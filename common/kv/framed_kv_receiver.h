// FramedKvReceiver: the decode worker's end of the TCP KV data plane
// (docs/protocol/kv-wire.md). It owns a listening socket and
// an I/O thread; prefill workers connect (one persistent connection each)
// and stream frames that this class validates against the reservations
// registered with Expect() before reading their payload straight into the
// reserved KvCache blocks. Which epoch of a transfer may write into its
// blocks, and when an ended one may hand them back, is KvEpochFence's
// bookkeeping (kv_epoch_fence.h); the device paths are KvIpcPeers and
// KvNcclPeers.
//
// Thread-safety: as KvReceiver. The KvCache is the engine's; this class only
// computes block addresses from it and writes into blocks of pending
// reservations, on its I/O thread.
#ifndef PDSERVE_COMMON_KV_FRAMED_KV_RECEIVER_H_
#define PDSERVE_COMMON_KV_FRAMED_KV_RECEIVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/kv_cache.h"
#include "common/kv/kv_auth.h"
#include "common/kv/kv_transport.h"
#include "common/tls/reloading_tls_context.h"

namespace pdserve {

struct FramedKvReceiverOptions {
  // "host:port" to listen on; port 0 picks a free one (see port()).
  std::string listen_address = "0.0.0.0:0";
  // A peer that makes no progress for this long in the middle of a frame,
  // or while an ack to it is pending, is disconnected.
  absl::Duration idle_timeout = absl::Seconds(10);
  // SO_RCVBUF of accepted connections; 0 keeps the kernel's autotuning.
  int socket_buffer_bytes = 0;
  // Accept only peers that prove the shared KV secret (kv_auth.h) before
  // their first frame. Null = no authentication.
  std::shared_ptr<const KvAuthKey> auth;
  // Accept only mutual-TLS connections from peers whose certificate the
  // context's CA signed (kv_stream.h, --kv_tls). Null = plain TCP.
  std::shared_ptr<ReloadingTlsContext> tls;
};

class FramedKvReceiver : public KvReceiver {
 public:
  // Binds, listens and starts serving. `cache` must outlive the receiver.
  static absl::StatusOr<std::unique_ptr<FramedKvReceiver>> Create(KvCache* cache,
                                                               const FramedKvReceiverOptions& options);

  // Ends every pending reservation with CANCELLED and closes all connections.
  ~FramedKvReceiver() override = default;

  // The bound port (the chosen one when the options asked for port 0).
  virtual uint16_t port() const = 0;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_FRAMED_KV_RECEIVER_H_
