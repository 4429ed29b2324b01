#include "tools/generation_target.h"

#include <grpcpp/grpcpp.h>

#include <utility>

namespace pdserve {
namespace {

// One request in flight. Callbacks of one call never overlap (one read is
// outstanding at a time), so the record needs no lock. Deletes itself in
// OnDone, the last callback gRPC makes, before reporting completion.
class StreamCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  StreamCall(v1::GenerateRequest request, RequestRecord record, BenchDoneFn done)
      : request_(std::move(request)), record_(std::move(record)), done_(std::move(done)) {}

  void Start(v1::Generation::StubInterface* stub, absl::Duration timeout,
             BenchClock::time_point bench_start) {
    ctx_.set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
    stub->async()->Generate(&ctx_, &request_, this);
    StartRead(&response_);
    sent_ = BenchClock::now();
    record_.send_s = MsBetween(bench_start, sent_) / 1000.0;
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream is over; OnDone follows
    // Timestamp before any other work so that our own handling is not
    // counted as server time.
    const BenchClock::time_point now = BenchClock::now();
    if (response_.has_chunk()) {
      const v1::Chunk& c = response_.chunk();
      if (c.token_ids_size() > 0 || !c.text().empty()) {
        record_.chunks.push_back({MsBetween(sent_, now), c.token_ids_size()});
      }
    } else if (response_.has_started() && response_.started().prompt_tokens() > 0) {
      // In text-prompt mode the server's count is the one that matters.
      record_.input_tokens = response_.started().prompt_tokens();
    } else if (response_.has_finished() && response_.finished().has_timings()) {
      record_.timings = ToPhases(response_.finished().timings());
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    const BenchClock::time_point end = BenchClock::now();
    record_.e2e_ms = MsBetween(sent_, end);
    record_.code = static_cast<absl::StatusCode>(status.error_code());
    if (!status.ok()) record_.error = status.error_message();
    // The context holds a channel reference, so the call is destroyed before
    // RunLoad can return: otherwise the caller may drop its channel and
    // leave the last reference to die here, on a gRPC callback thread, which
    // gRPC 1.51 cannot tear a channel down from (grpc/grpc#32584: crash in
    // grpc_cq_internal_unref).
    BenchDoneFn done = std::move(done_);
    RequestRecord record = std::move(record_);
    delete this;
    done(std::move(record), end);
  }

 private:
  grpc::ClientContext ctx_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
  RequestRecord record_;
  BenchDoneFn done_;
  BenchClock::time_point sent_;
};

}  // namespace

PhaseTimings ToPhases(const v1::Timings& t) {
  PhaseTimings p;
  p.router_queue_ms = t.router_queue_ms();
  p.decode_admission_ms = t.decode_admission_ms();
  p.prefill_queue_ms = t.prefill_queue_ms();
  p.prefill_compute_ms = t.prefill_compute_ms();
  p.kv_transfer_ms = t.kv_transfer_ms();
  p.kv_transfer_bytes = static_cast<double>(t.kv_transfer_bytes());
  p.first_decode_step_ms = t.first_decode_step_ms();
  p.server_ttft_ms = t.ttft_ms();
  p.server_e2e_ms = t.e2e_ms();
  p.remote_prefill = t.prefill_mode() == "remote";
  return p;
}

v1::GenerateRequest BenchRequest(const BenchRequestSpec& spec) {
  v1::GenerateRequest req;
  if (spec.text.empty()) {
    req.mutable_tokens()->mutable_ids()->Add(spec.prompt.begin(), spec.prompt.end());
  } else {
    req.set_text(spec.text);
  }
  req.set_max_tokens(spec.max_tokens);
  req.set_ignore_eos(spec.ignore_eos);
  req.set_return_token_ids(true);
  *req.mutable_sampling() = spec.sampling;
  return req;
}

void GenerationTarget::Start(const BenchRequestSpec& spec, RequestRecord record,
                             BenchClock::time_point bench_start, BenchDoneFn done) {
  auto* call = new StreamCall(BenchRequest(spec), std::move(record), std::move(done));
  call->Start(stub_, spec.timeout, bench_start);
}

}  // namespace pdserve
