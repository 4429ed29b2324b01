// Test-only fakes of the prefill and decode workers: real gRPC servers on
// loopback speaking worker.proto, with scripted output and fault knobs
// (refuse, hang, die mid-stream, fail, incompatible handshake), and the
// recovery RPCs (RetryTransfer; first_index after a failover; Migrating and
// Handoff, as a draining decode worker moves a stream). They let
// the router's state machine be driven through every path without a model.
//
// A FakeKvBus stands in for the KV data plane: the fake prefill worker
// "commits" a transfer id on it and the fake decode worker waits for that
// commit after Reserved, as a real decode worker waits for the KV commit.
#ifndef PDSERVE_TESTS_TESTING_FAKE_WORKERS_H_
#define PDSERVE_TESTS_TESTING_FAKE_WORKERS_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pdserve/v1/worker.grpc.pb.h"

namespace pdserve::test {

class FakeKvBus {
 public:
  uint64_t NewTransferId() { return next_id_.fetch_add(1); }

  void Commit(uint64_t transfer_id) {
    absl::MutexLock lock(&mu_);
    committed_.insert(transfer_id);
  }

  // A layer of the transfer arrived (a real receiver's wait restarts).
  void Progress(uint64_t transfer_id) {
    absl::MutexLock lock(&mu_);
    last_progress_[transfer_id] = absl::Now();
  }

  // True once committed; false if the RPC was cancelled or `timeout`
  // passed since the wait began or the transfer's last Progress.
  bool WaitCommit(uint64_t transfer_id, grpc::ServerContext* ctx, absl::Duration timeout) {
    absl::Time until = absl::Now() + timeout;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (committed_.contains(transfer_id)) return true;
        if (auto it = last_progress_.find(transfer_id); it != last_progress_.end()) {
          until = std::max(until, it->second + timeout);
        }
      }
      if (ctx->IsCancelled() || absl::Now() >= until) return false;
      absl::SleepFor(absl::Milliseconds(2));
    }
  }

 private:
  std::atomic<uint64_t> next_id_{100};
  absl::Mutex mu_;
  absl::flat_hash_set<uint64_t> committed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, absl::Time> last_progress_ ABSL_GUARDED_BY(mu_);
};

inline v1::KvLayout TestKvLayout() {
  v1::KvLayout l;
  l.set_num_layers(2);
  l.set_num_kv_heads(2);
  l.set_head_dim(16);
  l.set_block_size(16);
  l.set_dtype("f16");
  return l;
}

// Waits (polling) until the client or the server cancels the RPC.
inline void WaitCancelled(grpc::ServerContext* ctx) {
  while (!ctx->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

// The control-plane half both fakes share: GetInfo, GetLoad, WatchLoad.
struct FakeControl {
  v1::WorkerInfo info;
  v1::LoadReport load;
  std::atomic<bool> stopping{false};
  std::atomic<bool> frozen{false};            // the process is stopped: no report leaves
  std::atomic<uint64_t> prefill_progress{0};  // LoadReport.prefill_progress

  v1::LoadReport Load() const {
    v1::LoadReport r = load;
    r.set_prefill_progress(prefill_progress.load());
    return r;
  }

  grpc::Status WatchLoad(grpc::ServerContext* ctx, const v1::WatchLoadRequest* request,
                         grpc::ServerWriter<v1::LoadReport>* writer) {
    const auto interval = std::chrono::milliseconds(std::max<uint32_t>(request->interval_ms(), 5));
    while (!ctx->IsCancelled() && !stopping.load()) {
      if (!frozen.load() && !writer->Write(Load())) break;
      std::this_thread::sleep_for(interval);
    }
    return grpc::Status::OK;
  }
};

class FakeDecodeWorker final : public v1::DecodeWorker::Service {
 public:
  struct Options {
    std::string fingerprint;
    std::vector<int32_t> output;  // tokens to generate, one per event
    uint32_t free_blocks = 100;
    uint32_t cached_prefix_tokens = 0;
    absl::Duration token_delay = absl::Milliseconds(1);
    bool refuse = false;  // RESOURCE_EXHAUSTED at once
    bool hang = false;    // after Reserved/commit, never produce a token
    int die_after = -1;   // UNAVAILABLE after this many tokens
    // UNAVAILABLE instead of DecodeFinished once every token was sent.
    bool lose_finished = false;
    // After this many tokens the whole worker goes silent, as under SIGSTOP:
    // its streams stay open, but no event and no load report leaves it.
    int freeze_after = -1;
    // After this many tokens of a stream that accepts migration, the
    // worker drains: it sends Migrating and holds the stream until a
    // Handoff (which commits the target's transfer on the bus) or a cancel.
    int offer_after = -1;
    bool fail_handoff = false;  // Handoff answers UNAVAILABLE (the push broke)
    // After Reserved, the worker crashes before any KV lands.
    bool die_when_reserved = false;
    int port = 0;  // 0: any free port
    // Any 127.0.0.0/8 address: several fakes can share one port, as the
    // pods behind one DNS name do.
    std::string host = "127.0.0.1";
    // Null = plaintext.
    std::shared_ptr<grpc::ServerCredentials> credentials;
  };

  FakeDecodeWorker(Options options, FakeKvBus* bus) : options_(std::move(options)), bus_(bus) {
    control_.info.set_worker_id("fake-decode");
    control_.info.set_role(v1::WORKER_ROLE_DECODE);
    control_.info.set_model_fingerprint(options_.fingerprint);
    *control_.info.mutable_kv_layout() = TestKvLayout();
    control_.info.set_protocol_version(1);
    control_.info.set_kv_endpoint("127.0.0.1:1");
    // The fake takes any request: its pool is as large as any test needs.
    control_.load.set_kv_blocks_total(1 << 20);
    control_.load.set_kv_blocks_free(options_.free_blocks);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(
        options_.host + ":" + std::to_string(options_.port),
        options_.credentials ? options_.credentials : grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeDecodeWorker() override {
    control_.stopping = true;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  std::string address() const { return options_.host + ":" + std::to_string(port_); }
  int port() const { return port_; }
  int decode_calls() const { return decode_calls_.load(); }
  int cancelled_calls() const { return cancelled_calls_.load(); }
  int retry_calls() const { return retry_calls_.load(); }
  int handoff_calls() const { return handoff_calls_.load(); }
  v1::DecodeRequest last_request() {
    absl::MutexLock lock(&mu_);
    return last_request_;
  }

  grpc::Status GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*,
                       v1::WorkerInfo* info) override {
    *info = control_.info;
    return grpc::Status::OK;
  }
  grpc::Status GetLoad(grpc::ServerContext*, const v1::GetLoadRequest*,
                       v1::LoadReport* load) override {
    *load = control_.Load();
    return grpc::Status::OK;
  }
  grpc::Status WatchLoad(grpc::ServerContext* ctx, const v1::WatchLoadRequest* request,
                         grpc::ServerWriter<v1::LoadReport>* writer) override {
    return control_.WatchLoad(ctx, request, writer);
  }

  // Moves a reservation that waits for its commit to the next epoch.
  grpc::Status RetryTransfer(grpc::ServerContext*, const v1::RetryTransferRequest* request,
                             v1::RetryTransferResponse* response) override {
    ++retry_calls_;
    absl::MutexLock lock(&mu_);
    auto it = epochs_.find(request->transfer_id());
    if (it == epochs_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such transfer");
    response->set_epoch(++it->second);
    bus_->Progress(request->transfer_id());  // a fresh wait, as a real one re-arms
    return grpc::Status::OK;
  }

  // Pushes an offered stream's "KV": commits the target's transfer.
  grpc::Status Handoff(grpc::ServerContext*, const v1::HandoffRequest* request,
                       v1::HandoffResponse* response) override {
    ++handoff_calls_;
    absl::MutexLock lock(&mu_);
    auto it = offered_.find(request->offer_id());
    if (it == offered_.end() || it->second.handed_off ||
        it->second.request_id != request->request_id()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no open offer");
    }
    if (options_.fail_handoff) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "push broke");
    bus_->Commit(request->target().transfer_id());
    it->second.handed_off = true;
    response->set_kv_transfer_bytes(4096);
    return grpc::Status::OK;
  }

  grpc::Status Decode(grpc::ServerContext* ctx, const v1::DecodeRequest* request,
                      grpc::ServerWriter<v1::DecodeEvent>* writer) override {
    ++decode_calls_;
    {
      absl::MutexLock lock(&mu_);
      last_request_ = *request;
    }
    if (options_.refuse) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "no free KV blocks");
    }
    if (!request->local_prefill()) {
      const uint64_t transfer_id = bus_->NewTransferId();
      {
        absl::MutexLock lock(&mu_);
        epochs_[transfer_id] = 1;
      }
      v1::DecodeEvent e;
      v1::Reserved* r = e.mutable_reserved();
      r->set_transfer_id(transfer_id);
      r->set_epoch(1);
      r->set_kv_endpoint(control_.info.kv_endpoint());
      *r->mutable_kv_layout() = TestKvLayout();
      r->set_cached_prefix_tokens(options_.cached_prefix_tokens);
      writer->Write(e);
      if (options_.die_when_reserved) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode worker crashed");
      }
      const bool committed =
          bus_->WaitCommit(transfer_id, ctx, absl::Milliseconds(request->kv_wait_ms()));
      {
        absl::MutexLock lock(&mu_);
        epochs_.erase(transfer_id);
      }
      if (!committed) {
        return Cancelled(ctx, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "no KV commit"));
      }
    }
    if (options_.hang) {
      WaitCancelled(ctx);
      return Cancelled(ctx, grpc::Status::CANCELLED);
    }
    return Stream(ctx, *request, writer);
  }

 private:
  grpc::Status Stream(grpc::ServerContext* ctx, const v1::DecodeRequest& request,
                      grpc::ServerWriter<v1::DecodeEvent>* writer) {
    // A request moved here by a decode failover continues at first_index.
    const int first = request.first_index();
    int n = first;
    for (; n < static_cast<int>(options_.output.size()) && n - first < request.max_tokens(); ++n) {
      if (n == options_.die_after) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode worker crashed");
      }
      if (n == options_.offer_after && request.accepts_migration()) {
        return Offer(ctx, request, n, writer);
      }
      if (n == options_.freeze_after) {
        control_.frozen = true;
        WaitCancelled(ctx);
        return Cancelled(ctx, grpc::Status::CANCELLED);
      }
      v1::DecodeEvent e;
      e.mutable_tokens()->add_ids(options_.output[n]);
      e.mutable_tokens()->set_first_index(n);
      if (ctx->IsCancelled() || !writer->Write(e)) {
        return Cancelled(ctx, grpc::Status::CANCELLED);
      }
      absl::SleepFor(options_.token_delay);
    }
    if (options_.lose_finished) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode worker crashed before finishing");
    }
    v1::DecodeEvent e;
    v1::DecodeFinished* f = e.mutable_finished();
    f->set_reason(n - first == request.max_tokens() ? v1::FINISH_REASON_LENGTH
                                                    : v1::FINISH_REASON_EOS);
    f->set_completion_tokens(n);
    f->mutable_timings()->set_decode_admission_ms(1.5);
    f->mutable_timings()->set_first_decode_step_ms(2.5);
    // A local prefill's hit is reported here (a remote one's in Reserved).
    if (request.local_prefill()) {
      f->mutable_timings()->set_prefill_cached_tokens(options_.cached_prefix_tokens);
    }
    writer->Write(e);
    return grpc::Status::OK;
  }

  // Sends Migrating after `n` tokens and holds the stream until handed off.
  grpc::Status Offer(grpc::ServerContext* ctx, const v1::DecodeRequest& request, int n,
                     grpc::ServerWriter<v1::DecodeEvent>* writer) {
    const uint64_t offer_id = bus_->NewTransferId();
    {
      absl::MutexLock lock(&mu_);
      offered_[offer_id] = Offered{request.request_id(), false};
    }
    v1::DecodeEvent e;
    e.mutable_migrating()->set_generated_tokens(n);
    e.mutable_migrating()->set_offer_id(offer_id);
    if (!writer->Write(e)) return Cancelled(ctx, grpc::Status::CANCELLED);
    while (!ctx->IsCancelled()) {
      {
        absl::MutexLock lock(&mu_);
        if (offered_[offer_id].handed_off) {
          return grpc::Status(grpc::StatusCode::ABORTED, "migrated");
        }
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    return Cancelled(ctx, grpc::Status::CANCELLED);
  }

  grpc::Status Cancelled(grpc::ServerContext* ctx, grpc::Status otherwise) {
    if (ctx->IsCancelled()) ++cancelled_calls_;
    return otherwise;
  }

  const Options options_;
  FakeKvBus* const bus_;
  FakeControl control_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> decode_calls_{0};
  std::atomic<int> cancelled_calls_{0};
  std::atomic<int> retry_calls_{0};
  std::atomic<int> handoff_calls_{0};
  absl::Mutex mu_;
  // Offered streams by offer id: whose, and handed off yet?
  struct Offered {
    std::string request_id;
    bool handed_off = false;
  };
  absl::flat_hash_map<uint64_t, Offered> offered_ ABSL_GUARDED_BY(mu_);
  v1::DecodeRequest last_request_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint64_t> epochs_ ABSL_GUARDED_BY(mu_);  // awaiting commit
};

class FakePrefillWorker final : public v1::PrefillWorker::Service {
 public:
  struct Options {
    std::string fingerprint;
    uint64_t queued_prompt_tokens = 0;
    bool fail = false;  // fail_code at once
    grpc::StatusCode fail_code = grpc::StatusCode::UNAVAILABLE;
    bool hang = false;  // never answer until cancelled
    // On its first prefill the whole worker goes silent, as under SIGSTOP:
    // the call stays open, but no answer and no load report leaves it.
    bool freeze = false;
    // Commit the KV, then fail: the decode worker has it but the ack (and
    // the response) never arrive.
    bool fail_after_commit = false;
    // Computes this long before committing: a long prompt. While it does,
    // it streams "layers" and its load reports show progress, unless
    // `stalls` (an engine wedged behind a live server).
    absl::Duration compute = absl::ZeroDuration();
    bool stalls = false;
    // Computes (its load reports show progress) but no KV frame reaches the
    // decode worker, and it never commits: a broken KV connection.
    bool sends_no_kv = false;
  };

  FakePrefillWorker(Options options, FakeKvBus* bus) : options_(std::move(options)), bus_(bus) {
    control_.info.set_worker_id("fake-prefill");
    control_.info.set_role(v1::WORKER_ROLE_PREFILL);
    control_.info.set_model_fingerprint(options_.fingerprint);
    *control_.info.mutable_kv_layout() = TestKvLayout();
    control_.info.set_protocol_version(1);
    control_.load.set_queued_prompt_tokens(options_.queued_prompt_tokens);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakePrefillWorker() override {
    control_.stopping = true;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int prefill_calls() const { return prefill_calls_.load(); }
  int cancelled_calls() const { return cancelled_calls_.load(); }
  v1::PrefillRequest last_request() {
    absl::MutexLock lock(&mu_);
    return last_request_;
  }

  grpc::Status GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*,
                       v1::WorkerInfo* info) override {
    *info = control_.info;
    return grpc::Status::OK;
  }
  grpc::Status GetLoad(grpc::ServerContext*, const v1::GetLoadRequest*,
                       v1::LoadReport* load) override {
    *load = control_.Load();
    return grpc::Status::OK;
  }
  grpc::Status WatchLoad(grpc::ServerContext* ctx, const v1::WatchLoadRequest* request,
                         grpc::ServerWriter<v1::LoadReport>* writer) override {
    return control_.WatchLoad(ctx, request, writer);
  }

  grpc::Status Prefill(grpc::ServerContext* ctx, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override {
    ++prefill_calls_;
    {
      absl::MutexLock lock(&mu_);
      last_request_ = *request;
    }
    if (options_.fail) return grpc::Status(options_.fail_code, "prefill failed (fake)");
    if (options_.freeze) control_.frozen = true;
    if (options_.hang || options_.freeze) {
      WaitCancelled(ctx);
      ++cancelled_calls_;
      return grpc::Status::CANCELLED;
    }
    if (!Compute(ctx, request->target().transfer_id()) || options_.sends_no_kv) {
      ++cancelled_calls_;
      return grpc::Status::CANCELLED;
    }
    bus_->Commit(request->target().transfer_id());
    if (options_.fail_after_commit) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection lost after the commit");
    }
    response->set_queue_ms(0.5);
    response->set_compute_ms(7.0);
    response->set_kv_transfer_ms(1.25);
    response->set_kv_transfer_bytes(4096);
    return grpc::Status::OK;
  }

 private:
  // Options::compute; false if cancelled first.
  bool Compute(grpc::ServerContext* ctx, uint64_t transfer_id) {
    const absl::Time until = absl::Now() + options_.compute;
    while (absl::Now() < until) {
      if (ctx->IsCancelled()) return false;
      if (!options_.stalls) {
        control_.prefill_progress.fetch_add(1);
        if (!options_.sends_no_kv) bus_->Progress(transfer_id);
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }

  const Options options_;
  FakeKvBus* const bus_;
  FakeControl control_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> prefill_calls_{0};
  std::atomic<int> cancelled_calls_{0};
  absl::Mutex mu_;
  v1::PrefillRequest last_request_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve::test

#endif  // PDSERVE_TESTS_TESTING_FAKE_WORKERS_H_
