// DecodeTarget: `pdserve bench` straight against a decode worker's Decode
// RPC with local prefill — the same engine work as a colocated request
// through the router, minus the router. Benchmarking both on the same
// worker measures what the router adds (docs/PERFORMANCE.md).
#ifndef PDSERVE_TOOLS_BENCH_DECODE_TARGET_H_
#define PDSERVE_TOOLS_BENCH_DECODE_TARGET_H_

#include "pdserve/v1/worker.grpc.pb.h"
#include "tools/bench/bench_target.h"

namespace pdserve {

// Token ids only: a decode worker takes no text.
v1::DecodeRequest DecodeBenchRequest(const BenchRequestSpec& spec, int64_t index);

class DecodeTarget final : public BenchTarget {
 public:
  // `stub` must outlive every request started.
  explicit DecodeTarget(v1::DecodeWorker::StubInterface* stub) : stub_(stub) {}

  void Start(const BenchRequestSpec& spec, RequestRecord record,
             BenchClock::time_point bench_start, BenchDoneFn done) override;

 private:
  v1::DecodeWorker::StubInterface* const stub_;
};

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_DECODE_TARGET_H_
