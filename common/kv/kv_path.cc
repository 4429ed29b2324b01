#include "common/kv/kv_path.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace pdserve {

absl::StatusOr<KvTransportFlag> ParseKvTransportFlag(absl::string_view text) {
  if (text == "auto") return KvTransportFlag::kAuto;
  if (text == kKvTransportTcp) return KvTransportFlag::kTcp;
  if (text == kKvTransportCudaIpc) return KvTransportFlag::kCudaIpc;
  if (text == kKvTransportNccl) return KvTransportFlag::kNccl;
  return absl::InvalidArgumentError(
      absl::StrCat("kv transport \"", text, "\" is not one of auto, tcp, cuda_ipc, nccl"));
}

const char* KvPathName(KvPath path) {
  switch (path) {
    case KvPath::kCudaIpc:
      return kKvTransportCudaIpc;
    case KvPath::kNccl:
      return kKvTransportNccl;
    default:
      return kKvTransportTcp;
  }
}

std::vector<std::string> AcceptedKvTransports(bool device_pool, bool nccl) {
  std::vector<std::string> out = {kKvTransportTcp};
  if (device_pool) out.push_back(kKvTransportCudaIpc);
  if (device_pool && nccl) out.push_back(kKvTransportNccl);
  return out;
}

std::string LocalKvHostId() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(f, boot);
  boot = std::string(absl::StripAsciiWhitespace(boot));
  // CUDA IPC handles open only within one IPC namespace: two containers on
  // one node (separate pods) must not look alike.
  char ns[128];
  const ssize_t n = readlink("/proc/self/ns/ipc", ns, sizeof(ns) - 1);
  if (boot.empty() || n <= 0) return "";
  return absl::StrCat(boot, "/", absl::string_view(ns, static_cast<size_t>(n)));
}

namespace {

// Why CUDA IPC cannot serve this pair; OK when it can.
absl::Status CudaIpcPossible(const KvLocalSide& local, const KvPeerOffer& peer) {
  if (!local.device_pool) {
    return absl::FailedPreconditionError(
        "kv transport cuda_ipc: this worker's KV cache is in host memory (needs --device=cuda)");
  }
  if (std::find(peer.transports.begin(), peer.transports.end(), kKvTransportCudaIpc) ==
      peer.transports.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kv transport cuda_ipc: the decode worker accepts only ",
        peer.transports.empty() ? std::string(kKvTransportTcp) : absl::StrJoin(peer.transports, ", "),
        " (its KV cache is not in device memory)"));
  }
  if (local.host_id.empty() || local.host_id != peer.host_id) {
    return absl::FailedPreconditionError(
        "kv transport cuda_ipc: the decode worker runs on another node (CUDA IPC needs both "
        "workers on one node)");
  }
  return absl::OkStatus();
}

absl::Status NcclPossible(const KvLocalSide& local, const KvPeerOffer& peer) {
  if (!local.device_pool || !local.nccl) {
    return absl::FailedPreconditionError(
        "kv transport nccl: this worker's KV cache cannot use NCCL (needs --device=cuda and a "
        "build with NCCL)");
  }
  if (std::find(peer.transports.begin(), peer.transports.end(), kKvTransportNccl) ==
      peer.transports.end()) {
    return absl::FailedPreconditionError(
        "kv transport nccl: the decode worker does not accept nccl (its KV cache is not on a GPU, "
        "or it was built without NCCL)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KvPath> ChooseKvPath(KvTransportFlag requested, const KvLocalSide& local,
                                    const KvPeerOffer& peer) {
  switch (requested) {
    case KvTransportFlag::kTcp:
      return KvPath::kTcp;
    case KvTransportFlag::kCudaIpc:
      if (absl::Status st = CudaIpcPossible(local, peer); !st.ok()) return st;
      return KvPath::kCudaIpc;
    case KvTransportFlag::kNccl:
      if (absl::Status st = NcclPossible(local, peer); !st.ok()) return st;
      return KvPath::kNccl;
    case KvTransportFlag::kAuto:
      return CudaIpcPossible(local, peer).ok() ? KvPath::kCudaIpc : KvPath::kTcp;
  }
  return KvPath::kTcp;
}

}  // namespace pdserve
