#include "tools/decode_target.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "tools/generation_target.h"

namespace pdserve {
namespace {

// One Decode stream in flight; same life cycle as the Generation one.
class DecodeCall final : public grpc::ClientReadReactor<v1::DecodeEvent> {
 public:
  DecodeCall(v1::DecodeRequest request, RequestRecord record, BenchDoneFn done)
      : request_(std::move(request)), record_(std::move(record)), done_(std::move(done)) {}

  void Start(v1::DecodeWorker::StubInterface* stub, absl::Duration timeout,
             BenchClock::time_point bench_start) {
    ctx_.set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
    stub->async()->Decode(&ctx_, &request_, this);
    StartRead(&event_);
    sent_ = BenchClock::now();
    record_.send_s = MsBetween(bench_start, sent_) / 1000.0;
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const BenchClock::time_point now = BenchClock::now();
    if (event_.has_tokens() && event_.tokens().ids_size() > 0) {
      record_.chunks.push_back({MsBetween(sent_, now), event_.tokens().ids_size()});
    } else if (event_.has_finished() && event_.finished().has_timings()) {
      record_.timings = ToPhases(event_.finished().timings());
    }
    StartRead(&event_);
  }

  void OnDone(const grpc::Status& status) override {
    const BenchClock::time_point end = BenchClock::now();
    record_.e2e_ms = MsBetween(sent_, end);
    record_.code = static_cast<absl::StatusCode>(status.error_code());
    if (!status.ok()) record_.error = status.error_message();
    // Destroyed before reporting, for the reason GenerationTarget's calls are.
    BenchDoneFn done = std::move(done_);
    RequestRecord record = std::move(record_);
    delete this;
    done(std::move(record), end);
  }

 private:
  grpc::ClientContext ctx_;
  v1::DecodeRequest request_;
  v1::DecodeEvent event_;
  RequestRecord record_;
  BenchDoneFn done_;
  BenchClock::time_point sent_;
};

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
  v1::DecodeRequest request = DecodeBenchRequest(spec, record.index);
  auto* call = new DecodeCall(std::move(request), std::move(record), std::move(done));
  call->Start(stub_, spec.timeout, bench_start);
}

}  // namespace pdserve
