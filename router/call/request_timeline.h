// RequestTimeline: the instants the router observes for one request, and
// the merge of those with the workers' own measurements into the Timings
// the client receives in Finished. Each party reports what only it can
// see: the decode worker its admission and first step, the prefill worker
// its queue, compute and KV transfer, the router its own queueing, TTFT and
// end-to-end time as the client experiences them (minus the network).
//
// A value type; not thread-safe (owned by GenerateFsm, which GenerateCall
// serialises).
#ifndef PDSERVE_ROUTER_CALL_REQUEST_TIMELINE_H_
#define PDSERVE_ROUTER_CALL_REQUEST_TIMELINE_H_

#include <vector>

#include "absl/time/time.h"
#include "pdserve/v1/common.pb.h"
#include "pdserve/v1/worker.pb.h"

namespace pdserve::router {

class RequestTimeline {
 public:
  explicit RequestTimeline(absl::Time admitted) : admitted_(admitted) {}

  // A decode worker was asked (the last attempt counts).
  void MarkDecodeAsked(absl::Time t) { decode_asked_ = t; }
  void MarkReserved(absl::Time t) { reserved_ = t; }
  // Only the first call counts.
  void MarkFirstToken(absl::Time t) {
    if (first_token_ == absl::InfinitePast()) first_token_ = t;
  }
  // A token event with `n` tokens arrived: the first marks the first token,
  // each later one adds an inter-token latency (its gap to the previous
  // event over its token count) for the ITL histogram.
  void MarkTokens(absl::Time t, int n);
  const std::vector<double>& inter_token_seconds() const { return inter_token_seconds_; }

  absl::Duration Elapsed(absl::Time now) const { return now - admitted_; }

  // `prefill` is null for local prefill (or when the prefill response never
  // came); then the decode worker's prefill fields are kept.
  v1::Timings Merge(const v1::Timings& decode, const v1::PrefillResponse* prefill,
                    bool local_prefill, absl::Time now) const;

 private:
  absl::Time admitted_;
  absl::Time decode_asked_ = absl::InfinitePast();
  absl::Time reserved_ = absl::InfinitePast();
  absl::Time first_token_ = absl::InfinitePast();
  absl::Time last_tokens_ = absl::InfinitePast();
  std::vector<double> inter_token_seconds_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_REQUEST_TIMELINE_H_
