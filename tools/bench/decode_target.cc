#include "tools/bench/decode_target.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "tools/bench/bench_stream_call.h"
#include "tools/bench/generation_target.h"

namespace pdserve {
namespace {

void OnDecodeEvent(const v1::DecodeEvent& event, double ms, RequestRecord* record) {
  if (event.has_tokens() && event.tokens().ids_size() > 0) {
    record->chunks.push_back({ms, event.tokens().ids_size()});
  } else if (event.has_finished() && event.finished().has_timings()) {
    record->timings = ToPhases(event.finished().timings());
  }
}

}  // namespace

v1::DecodeRequest DecodeBenchRequest(const BenchRequestSpec& spec, int64_t index) {
  v1::DecodeRequest req;
  req.set_request_id(absl::StrCat("bench-", index));
  req.mutable_prompt_tokens()->Add(spec.prompt.begin(), spec.prompt.end());
  *req.mutable_sampling() = spec.sampling;
  req.set_max_tokens(spec.max_tokens);
  req.set_ignore_eos(spec.ignore_eos);
  req.set_local_prefill(true);
  return req;
}

void DecodeTarget::Start(const BenchRequestSpec& spec, RequestRecord record,
                         BenchClock::time_point bench_start, BenchDoneFn done) {
  using Call = BenchStreamCall<v1::DecodeRequest, v1::DecodeEvent>;
  v1::DecodeRequest request = DecodeBenchRequest(spec, record.index);
  auto* call = new Call(std::move(request), std::move(record), std::move(done), OnDecodeEvent);
  call->Start(
      [stub = stub_](grpc::ClientContext* ctx, const v1::DecodeRequest* req,
                     grpc::ClientReadReactor<v1::DecodeEvent>* reactor) {
        stub->async()->Decode(ctx, req, reactor);
      },
      /*bearer_token=*/"", spec.timeout, bench_start);
}

}  // namespace pdserve
