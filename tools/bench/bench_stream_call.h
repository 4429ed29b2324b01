// BenchStreamCall: one server-streaming gRPC request of `pdserve bench` in
// flight, for any of the gRPC targets (router Generate, decode worker
// Decode). It timestamps each message as it arrives — before any other
// work, so our own handling is not counted as server time — hands it to
// the target's handler to fold into the record, and reports the record
// once the stream is over. Callbacks of one call never overlap (one read
// outstanding at a time), so the record needs no lock. Deletes itself in
// OnDone, the last callback gRPC makes.
#ifndef PDSERVE_TOOLS_BENCH_BENCH_STREAM_CALL_H_
#define PDSERVE_TOOLS_BENCH_BENCH_STREAM_CALL_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>
#include <utility>

#include "tools/bench/bench_target.h"

namespace pdserve {

template <typename Request, typename Response>
class BenchStreamCall final : public grpc::ClientReadReactor<Response> {
 public:
  // Folds one message, received `ms` after the request was sent, into the
  // record.
  using Handler = void (*)(const Response& message, double ms, RequestRecord* record);
  // Binds the call to a stub method: stub->async()->Method(ctx, request, reactor).
  using Launch = std::function<void(grpc::ClientContext*, const Request*,
                                    grpc::ClientReadReactor<Response>*)>;

  BenchStreamCall(Request request, RequestRecord record, BenchDoneFn done, Handler handler)
      : request_(std::move(request)),
        record_(std::move(record)),
        done_(std::move(done)),
        handler_(handler) {}

  void Start(const Launch& launch, const std::string& bearer_token, absl::Duration timeout,
             BenchClock::time_point bench_start) {
    if (!bearer_token.empty()) ctx_.AddMetadata("authorization", "Bearer " + bearer_token);
    ctx_.set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
    launch(&ctx_, &request_, this);
    this->StartRead(&response_);
    sent_ = BenchClock::now();
    record_.send_s = MsBetween(bench_start, sent_) / 1000.0;
    this->StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream is over; OnDone follows
    const BenchClock::time_point now = BenchClock::now();
    handler_(response_, MsBetween(sent_, now), &record_);
    this->StartRead(&response_);
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
  Request request_;
  Response response_;
  RequestRecord record_;
  BenchDoneFn done_;
  const Handler handler_;
  BenchClock::time_point sent_;
};

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_BENCH_STREAM_CALL_H_
