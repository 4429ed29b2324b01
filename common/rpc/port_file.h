// PortFile: how a process started on port 0 tells whoever started it which
// ports it bound. A supervisor that picks "free" ports itself races every
// other process on the machine between its check and the child's bind (seen
// as "Address already in use" under parallel tests); letting the kernel pick
// at bind time and reading the answer back has no such window.
//
// The file is written once the process serves (model loaded, gRPC server
// up), so its appearance is also the start-up signal. Format, one
// `name=port` per line: grpc, metrics (0 = no metrics server), kv (the
// decode worker's KV receiver; 0 elsewhere), http (the router's HTTP API;
// 0 elsewhere). It is written to a temporary
// name and renamed, so a reader never sees half of it.
#ifndef PDSERVE_COMMON_RPC_PORT_FILE_H_
#define PDSERVE_COMMON_RPC_PORT_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pdserve {

struct BoundPorts {
  int grpc = 0;
  int metrics = 0;
  int kv = 0;
  int http = 0;  // the router's OpenAI-compatible HTTP API; 0 = none
};

// No-op for an empty path.
absl::Status WritePortFile(const std::string& path, const BoundPorts& ports);
// NOT_FOUND while the file does not exist yet; INVALID_ARGUMENT for one
// that is not a port file (a missing or out-of-range grpc port).
absl::StatusOr<BoundPorts> ReadPortFile(const std::string& path);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RPC_PORT_FILE_H_
