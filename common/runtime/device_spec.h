// DeviceSpec: where a worker runs its model and keeps its KV cache, as
// spelled by --device: "cpu", "cuda" (device 0) or "cuda:N".
#ifndef PDSERVE_COMMON_RUNTIME_DEVICE_SPEC_H_
#define PDSERVE_COMMON_RUNTIME_DEVICE_SPEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pdserve {

struct DeviceSpec {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int ordinal = 0;  // CUDA device index

  bool is_cuda() const { return kind == Kind::kCuda; }
  std::string ToString() const;
  bool operator==(const DeviceSpec&) const = default;

  // INVALID_ARGUMENT naming the accepted spellings for anything else.
  static absl::StatusOr<DeviceSpec> Parse(absl::string_view text);
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_RUNTIME_DEVICE_SPEC_H_
