// GenerationTarget: `pdserve bench` against pdserve's public Generation API
// (the router, or any server implementing it such as the echo server of
// the calibration mode). One gRPC callback reactor per request, so
// thousands can be in flight without a thread each.
#ifndef PDSERVE_TOOLS_BENCH_GENERATION_TARGET_H_
#define PDSERVE_TOOLS_BENCH_GENERATION_TARGET_H_

#include <string>

#include "pdserve/v1/generation.grpc.pb.h"
#include "tools/bench/bench_target.h"

namespace pdserve {

// The request sent for `spec`: token ids, or text in text-prompt mode, and
// always token ids back, which is how output tokens are counted.
v1::GenerateRequest BenchRequest(const BenchRequestSpec& spec);

class GenerationTarget final : public BenchTarget {
 public:
  // `stub` must outlive every request started.
  // `bearer_token` ("" = none) is sent with every call.
  explicit GenerationTarget(v1::Generation::StubInterface* stub, std::string bearer_token = "")
      : stub_(stub), bearer_token_(std::move(bearer_token)) {}

  void Start(const BenchRequestSpec& spec, RequestRecord record,
             BenchClock::time_point bench_start, BenchDoneFn done) override;

 private:
  v1::Generation::StubInterface* const stub_;
  const std::string bearer_token_;
};

// The router's per-phase timings in the bench's terms.
PhaseTimings ToPhases(const v1::Timings& t);

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_GENERATION_TARGET_H_
