// Whether a GPU test runs: without a CUDA device it skips, unless
// PDSERVE_REQUIRE_GPU=1 (tests/gpu/device_check.sh sets it on the lent GPU
// machine), where a device that fails to start must fail the test with the
// runtime's reason instead of reading as a pass.
#ifndef PDSERVE_TESTS_GPU_GPU_TEST_ENV_H_
#define PDSERVE_TESTS_GPU_GPU_TEST_ENV_H_

#include <cstdlib>
#include <string>

#include "common/gpu/cuda/cuda_device.h"
#include "gtest/gtest.h"

namespace pdserve::testing {

inline bool GpuRequired() {
  const char* v = std::getenv("PDSERVE_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

// True when there is no device to test on (the caller then GTEST_SKIP()s);
// under GpuRequired() that is also a failure, with the reason.
inline bool NoGpu() {
  const absl::StatusOr<int> n = cuda::CountDevices();
  if (n.ok() && *n > 0) return false;
  if (GpuRequired()) {
    ADD_FAILURE() << "PDSERVE_REQUIRE_GPU=1 but no CUDA device: "
                  << (n.ok() ? std::string("the runtime sees 0 devices") : n.status().ToString());
  }
  return true;
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_GPU_GPU_TEST_ENV_H_
