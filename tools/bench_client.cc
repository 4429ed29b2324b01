#include "tools/bench_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace pdserve {
namespace {

using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

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

// What the pacing thread and the gRPC callback threads share. Calls hold a
// reference, so it outlives whichever side finishes last.
struct LoadState {
  explicit LoadState(int cap) : cap(cap) {}

  bool HasSlot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return cap <= 0 || in_flight < cap; }
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return in_flight == 0; }

  void Complete(RequestRecord record, Clock::time_point end) {
    absl::MutexLock lock(&mu);
    records.push_back(std::move(record));
    last_end = std::max(last_end, end);
    --in_flight;
  }

  const int cap;  // 0 = no cap on requests in flight
  absl::Mutex mu;
  int in_flight ABSL_GUARDED_BY(mu) = 0;
  std::vector<RequestRecord> records ABSL_GUARDED_BY(mu);
  Clock::time_point last_end ABSL_GUARDED_BY(mu);
};

// One request in flight. Callbacks of one call never overlap (one read is
// outstanding at a time), so the record needs no lock. Deletes itself in
// OnDone, the last callback gRPC makes, before reporting completion.
class StreamCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  StreamCall(std::shared_ptr<LoadState> state, v1::GenerateRequest request, RequestRecord record)
      : state_(std::move(state)), request_(std::move(request)), record_(std::move(record)) {}

  void Start(v1::Generation::StubInterface* stub, absl::Duration timeout,
             Clock::time_point bench_start) {
    ctx_.set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
    stub->async()->Generate(&ctx_, &request_, this);
    StartRead(&response_);
    sent_ = Clock::now();
    record_.send_s = MsBetween(bench_start, sent_) / 1000.0;
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream is over; OnDone follows
    // Timestamp before any other work so that our own handling is not
    // counted as server time.
    const Clock::time_point now = Clock::now();
    if (response_.has_chunk()) {
      const v1::Chunk& c = response_.chunk();
      if (c.token_ids_size() > 0 || !c.text().empty()) {
        record_.chunks.push_back({MsBetween(sent_, now), c.token_ids_size()});
      }
    } else if (response_.has_finished() && response_.finished().has_timings()) {
      record_.timings = ToPhases(response_.finished().timings());
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    const Clock::time_point end = Clock::now();
    record_.e2e_ms = MsBetween(sent_, end);
    record_.code = static_cast<absl::StatusCode>(status.error_code());
    if (!status.ok()) record_.error = status.error_message();
    // The context holds a channel reference, so the call is destroyed before
    // RunLoad can return: otherwise the caller may drop its channel and
    // leave the last reference to die here, on a gRPC callback thread, which
    // gRPC 1.51 cannot tear a channel down from (grpc/grpc#32584: crash in
    // grpc_cq_internal_unref).
    std::shared_ptr<LoadState> state = std::move(state_);
    RequestRecord record = std::move(record_);
    delete this;
    state->Complete(std::move(record), end);
  }

 private:
  std::shared_ptr<LoadState> state_;
  grpc::ClientContext ctx_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
  RequestRecord record_;
  Clock::time_point sent_;
};

absl::Status CheckOptions(const LoadOptions& o) {
  if (o.request_rate <= 0 && o.max_concurrency <= 0) {
    return absl::InvalidArgumentError(
        "nothing paces the run: set a request rate (open loop) or a concurrency cap (closed loop)");
  }
  if (o.num_requests <= 0 && o.duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("nothing ends the run: set a request count or a duration");
  }
  if (o.request_rate > 0 && o.burstiness <= 0) {
    return absl::InvalidArgumentError("burstiness must be > 0");
  }
  return absl::OkStatus();
}

}  // namespace

v1::GenerateRequest BenchRequest(const RequestShape& shape, const LoadOptions& options) {
  v1::GenerateRequest req;
  req.mutable_tokens()->mutable_ids()->Add(shape.prompt.begin(), shape.prompt.end());
  req.set_max_tokens(shape.max_tokens);
  req.set_ignore_eos(options.ignore_eos);
  req.set_return_token_ids(true);
  *req.mutable_sampling() = options.sampling;
  return req;
}

namespace {

// The pacing loop of one RunLoad call.
class LoadRunner {
 public:
  LoadRunner(v1::Generation::StubInterface* stub, const Workload& workload,
             const LoadOptions& options)
      : stub_(stub),
        workload_(workload),
        options_(options),
        state_(std::make_shared<LoadState>(options.max_concurrency)),
        // An unpaced run never draws a gap; the Gamma just needs valid
        // parameters.
        arrivals_(options.request_rate > 0 ? options.request_rate : 1.0,
                  options.request_rate > 0 ? options.burstiness : 1.0, options.seed),
        start_(Clock::now()),
        stop_(options.duration > absl::ZeroDuration()
                  ? start_ + std::chrono::duration_cast<Clock::duration>(
                                 absl::ToChronoNanoseconds(options.duration))
                  : Clock::time_point::max()),
        next_arrival_(start_) {}

  LoadResult Run() {
    for (int64_t i = 0; options_.num_requests <= 0 || i < options_.num_requests; ++i) {
      if (!WaitForTurn(i)) break;
      Launch(i);
    }
    return Collect();
  }

 private:
  // Sleeps until request i is due and a slot is free (counting it in
  // flight); false once the run's duration is over.
  bool WaitForTurn(int64_t i) {
    if (options_.request_rate > 0 && i > 0) {
      next_arrival_ += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(arrivals_.NextGapS()));
      if (next_arrival_ >= stop_) return false;
      std::this_thread::sleep_until(next_arrival_);
    }
    absl::MutexLock lock(&state_->mu);
    state_->mu.Await(absl::Condition(state_.get(), &LoadState::HasSlot));
    if (Clock::now() >= stop_) return false;
    ++state_->in_flight;
    return true;
  }

  void Launch(int64_t i) {
    const RequestShape shape = workload_.Make(options_.first_index + i);
    RequestRecord record;
    record.index = shape.index;
    record.input_tokens = static_cast<int>(shape.prompt.size());
    record.requested_output_tokens = shape.max_tokens;
    auto* call = new StreamCall(state_, BenchRequest(shape, options_), std::move(record));
    call->Start(stub_, options_.request_timeout, start_);
  }

  // Every call has a deadline, so gRPC ends each stream in bounded time.
  LoadResult Collect() {
    absl::MutexLock lock(&state_->mu);
    state_->mu.Await(absl::Condition(state_.get(), &LoadState::Idle));
    LoadResult out;
    out.records = std::move(state_->records);
    std::sort(out.records.begin(), out.records.end(),
              [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
    if (!out.records.empty()) out.duration_s = MsBetween(start_, state_->last_end) / 1000.0;
    return out;
  }

  v1::Generation::StubInterface* const stub_;
  const Workload& workload_;
  const LoadOptions& options_;
  const std::shared_ptr<LoadState> state_;
  ArrivalProcess arrivals_;
  const Clock::time_point start_;
  const Clock::time_point stop_;
  Clock::time_point next_arrival_;
};

}  // namespace

absl::StatusOr<LoadResult> RunLoad(v1::Generation::StubInterface* stub, const Workload& workload,
                                   const LoadOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  return LoadRunner(stub, workload, options).Run();
}

}  // namespace pdserve
