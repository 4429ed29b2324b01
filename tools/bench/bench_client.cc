#include "tools/bench/bench_client.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "tools/bench/generation_target.h"

namespace pdserve {
namespace {

using Clock = BenchClock;

// What the pacing thread and the completing requests share. Requests hold
// a reference, so it outlives whichever side finishes last.
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

// The pacing loop of one RunLoad call.
class LoadRunner {
 public:
  LoadRunner(BenchTarget* target, const Workload& workload, const LoadOptions& options)
      : target_(target),
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
    BenchRequestSpec spec = SpecFor(shape, options_);
    RequestRecord record;
    record.index = shape.index;
    record.input_tokens = static_cast<int>(spec.prompt.size());
    record.requested_output_tokens = shape.max_tokens;
    std::shared_ptr<LoadState> state = state_;
    target_->Start(spec, std::move(record), start_,
                   [state](RequestRecord r, Clock::time_point end) {
                     state->Complete(std::move(r), end);
                   });
  }

  // Every request has a deadline, so each one ends in bounded time.
  LoadResult Collect() {
    {
      absl::MutexLock lock(&state_->mu);
      state_->mu.Await(absl::Condition(state_.get(), &LoadState::Idle));
    }
    target_->Quiesce();
    absl::MutexLock lock(&state_->mu);
    LoadResult out;
    out.records = std::move(state_->records);
    std::sort(out.records.begin(), out.records.end(),
              [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
    if (!out.records.empty()) out.duration_s = MsBetween(start_, state_->last_end) / 1000.0;
    return out;
  }

  BenchTarget* const target_;
  const Workload& workload_;
  const LoadOptions& options_;
  const std::shared_ptr<LoadState> state_;
  ArrivalProcess arrivals_;
  const Clock::time_point start_;
  const Clock::time_point stop_;
  Clock::time_point next_arrival_;
};

}  // namespace

BenchRequestSpec SpecFor(const RequestShape& shape, const LoadOptions& options) {
  BenchRequestSpec spec;
  spec.prompt = shape.prompt;
  spec.messages = shape.messages;
  if (options.prompt_text != nullptr && shape.messages.empty()) {
    spec.text = options.prompt_text->Render(shape.prompt, &spec.prompt);
  }
  spec.max_tokens = shape.max_tokens;
  spec.ignore_eos = options.ignore_eos;
  spec.sampling = options.sampling;
  spec.timeout = options.request_timeout;
  return spec;
}

absl::StatusOr<LoadResult> RunLoad(BenchTarget* target, const Workload& workload,
                                   const LoadOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  return LoadRunner(target, workload, options).Run();
}

absl::StatusOr<LoadResult> RunLoad(v1::Generation::StubInterface* stub, const Workload& workload,
                                   const LoadOptions& options) {
  GenerationTarget target(stub);
  return RunLoad(&target, workload, options);
}

}  // namespace pdserve
