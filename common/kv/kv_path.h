// Which path a KV transfer's bytes take between a prefill worker P and a
// decode worker D, and how P picks it (--kv_transport):
//   tcp       every frame's bytes on the TCP connection (host pools: straight
//             from block memory; device pools: staged through host memory)
//   cuda_ipc  headers on TCP, bytes copied device to device by D from P's
//             pool, which P exported over CUDA IPC (both on one node)
//   nccl      headers on TCP, bytes over an NCCL channel of the connection
//             (GPUs on different nodes); never picked by auto, since an
//             NCCL network that cannot connect would cost a join timeout
//   auto      cuda_ipc when both pools are on devices of one node, else tcp
// D offers what it accepts in Reserved.kv_transports; P refuses a forced
// path the pair cannot take, with FAILED_PRECONDITION naming why.
//
// Pure functions, no device code; table-tested on CPU (kv_path_test).
#ifndef PDSERVE_COMMON_KV_KV_PATH_H_
#define PDSERVE_COMMON_KV_KV_PATH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pdserve {

enum class KvPath { kTcp, kCudaIpc, kNccl };
enum class KvTransportFlag { kAuto, kTcp, kCudaIpc, kNccl };

inline constexpr char kKvTransportTcp[] = "tcp";
inline constexpr char kKvTransportCudaIpc[] = "cuda_ipc";
inline constexpr char kKvTransportNccl[] = "nccl";

absl::StatusOr<KvTransportFlag> ParseKvTransportFlag(absl::string_view text);
const char* KvPathName(KvPath path);

// What a worker accepts: tcp always; cuda_ipc with a device pool; nccl with
// a device pool that can open NCCL peer channels.
std::vector<std::string> AcceptedKvTransports(bool device_pool, bool nccl = false);

// This process's identity for CUDA IPC: the kernel's boot id and the IPC
// namespace (separate containers of one node differ). Empty when either
// cannot be read, which rules CUDA IPC out.
std::string LocalKvHostId();

struct KvPeerOffer {
  std::vector<std::string> transports;  // empty: an older worker, tcp only
  std::string host_id;
};

struct KvLocalSide {
  bool device_pool = false;
  std::string host_id;
  bool nccl = false;  // the pool can open NCCL peer channels
};

absl::StatusOr<KvPath> ChooseKvPath(KvTransportFlag requested, const KvLocalSide& local,
                                    const KvPeerOffer& peer);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_KV_KV_PATH_H_
