// Helpers for integration tests that run the real binaries on loopback
// with the real model: start a LocalCluster, call Generate, read a worker's
// load, wait for pools to return to idle.
#ifndef PDSERVE_TESTS_TESTING_CLUSTER_TEST_UTIL_H_
#define PDSERVE_TESTS_TESTING_CLUSTER_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "pdserve/v1/worker.grpc.pb.h"
#include "tests/golden/test_model.h"
#include "tests/testing/temp_dir.h"
#include "tools/cli/local_cluster.h"

namespace pdserve::testing {

inline std::string BinDir() {
  const char* b = std::getenv("PDSERVE_BINARY_DIR");
  return std::string(b != nullptr ? b : ".") + "/bin";
}

inline std::unique_ptr<v1::Generation::Stub> RouterStub(const std::string& addr) {
  return v1::Generation::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
}

// Probes `c` until it serves (see StartCluster); fails early when one of
// its processes has exited.
inline absl::Status AwaitReady(LocalCluster& c, bool has_prefill_tier) {
  auto stub = RouterStub(c.router_address());
  // Generous: under sanitizers a cold start (model mmap, first forward
  // pass) is several times slower.
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (true) {
    RETURN_IF_ERROR(c.CheckAlive());
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("not ready within 120 s");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::GenerateRequest req;
    req.set_text("Hi");
    req.set_max_tokens(1);
    auto reader = stub->Generate(&ctx, req);
    v1::GenerateResponse msg;
    bool prefilled_locally = false;
    while (reader->Read(&msg)) {
      if (msg.has_finished()) {
        prefilled_locally = msg.finished().placement().prefill_worker().empty();
      }
    }
    const grpc::Status s = reader->Finish();
    const bool waiting_for_prefill = s.ok() && has_prefill_tier && prefilled_locally;
    // A probe that ran out of time (a cold worker) says nothing yet either.
    const bool not_yet = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!not_yet && !waiting_for_prefill) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(100));
  }
}

// Starts a cluster (LocalCluster::Start returns once every process has
// bound its ports) and waits (bounded) until the router sees its workers: a
// one-token probe answers with anything but UNAVAILABLE (or its own
// DEADLINE_EXCEEDED) and, with a prefill tier, was prefilled remotely — not
// prefilled locally for want of a live prefill worker (one still warming
// up would make the first requests of a test take the local path by
// chance). Every process binds port 0, so clusters of tests that ctest runs
// in parallel cannot collide on ports; the logs go to TestTempDir(tag), so
// they cannot collide on files either.
// `await_remote_prefill` false: ready once any probe is served (for a
// prefill tier that is meant never to be used).
inline std::unique_ptr<LocalCluster> StartCluster(LocalClusterOptions o, const std::string& tag,
                                                  bool await_remote_prefill = true) {
  o.bin_dir = BinDir();
  if (o.model.empty()) o.model = RealModelPath();
  o.log_dir = TestTempDir(tag);
  auto c = LocalCluster::Start(o);
  if (!c.ok()) {
    ADD_FAILURE() << "cluster '" << tag << "': " << c.status();
    return nullptr;
  }
  if (absl::Status ready = AwaitReady(**c, await_remote_prefill && o.prefill > 0 && !o.colocated);
      !ready.ok()) {
    ADD_FAILURE() << "cluster '" << tag << "' did not become ready: " << ready;
    return nullptr;
  }
  return std::move(*c);
}

struct GenerateOutcome {
  grpc::Status status;
  std::string text;
  std::vector<int32_t> ids;
  std::vector<v1::TokenLogprobs> logprobs;  // with sampling.logprobs
  v1::Finished finished;
  int chunks = 0;
};

// Runs one Generate; `cancel_after_chunks` > 0 cancels the call after that
// many text chunks; `streaming`, if given, is set once the first chunk came.
inline GenerateOutcome Generate(v1::Generation::Stub& stub, const v1::GenerateRequest& req,
                                absl::Duration timeout, int cancel_after_chunks = 0,
                                std::atomic<bool>* streaming = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  auto reader = stub.Generate(&ctx, req);
  GenerateOutcome out;
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
    if (msg.has_chunk()) {
      out.text += msg.chunk().text();
      out.ids.insert(out.ids.end(), msg.chunk().token_ids().begin(), msg.chunk().token_ids().end());
      out.logprobs.insert(out.logprobs.end(), msg.chunk().logprobs().begin(),
                          msg.chunk().logprobs().end());
      if (++out.chunks == cancel_after_chunks) ctx.TryCancel();
      if (streaming != nullptr) streaming->store(true);
    }
    if (msg.has_finished()) out.finished = msg.finished();
  }
  out.status = reader->Finish();
  return out;
}

// `creds`: how to reach the workers (TLS when they serve it).
inline absl::StatusOr<v1::LoadReport> DecodeLoad(
    const std::string& addr,
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials()) {
  auto stub = v1::DecodeWorker::NewStub(grpc::CreateChannel(addr, creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::LoadReport r;
  grpc::Status s = stub->GetLoad(&ctx, v1::GetLoadRequest(), &r);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return r;
}

inline absl::StatusOr<v1::LoadReport> PrefillLoad(
    const std::string& addr,
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials()) {
  auto stub = v1::PrefillWorker::NewStub(grpc::CreateChannel(addr, creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::LoadReport r;
  grpc::Status s = stub->GetLoad(&ctx, v1::GetLoadRequest(), &r);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return r;
}

// True once every worker of the cluster reports all KV blocks free and no
// sequence (bounded wait: the release is asynchronous). Prefix-cached
// blocks that no request references are reclaimable and count as free
// (LoadReport.kv_blocks_free includes kv_blocks_cached), so a warm cache
// is idle; a leaked reference is not.
inline bool PoolsIdle(
    const LocalCluster& c, absl::Duration within,
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials()) {
  const absl::Time deadline = absl::Now() + within;
  while (absl::Now() < deadline) {
    bool idle = true;
    for (const std::string& a : c.addresses("decode")) {
      auto l = DecodeLoad(a, creds);
      idle = idle && l.ok() && l->kv_blocks_free() == l->kv_blocks_total() &&
             l->running() + l->waiting() == 0 && l->pending_transfers() == 0;
    }
    for (const std::string& a : c.addresses("prefill")) {
      auto l = PrefillLoad(a, creds);
      idle = idle && l.ok() && l->kv_blocks_free() == l->kv_blocks_total() &&
             l->running() + l->waiting() == 0;
    }
    if (idle) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

inline v1::GenerateRequest TextRequest(const std::string& text, int max_tokens) {
  v1::GenerateRequest r;
  r.set_text(text);
  r.set_max_tokens(max_tokens);
  r.set_return_token_ids(true);
  return r;
}

inline v1::GenerateRequest ChatRequest(const std::string& user, int max_tokens) {
  v1::GenerateRequest r;
  v1::ChatMessage* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content(user);
  r.set_max_tokens(max_tokens);
  r.set_return_token_ids(true);
  return r;
}

// The value of an unlabelled series on a worker's /metrics, or -1.
inline double ScrapeMetric(int port, const std::string& name) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)}, ec);
  if (ec) return -1;
  asio::write(socket, asio::buffer(std::string("GET /metrics HTTP/1.1\r\n\r\n")), ec);
  std::string body;
  asio::read(socket, asio::dynamic_buffer(body), ec);
  const std::string key = "\n" + name + " ";
  const size_t at = body.find(key);
  return at == std::string::npos ? -1 : std::strtod(body.c_str() + at + key.size(), nullptr);
}

}  // namespace pdserve::testing

#endif  // PDSERVE_TESTS_TESTING_CLUSTER_TEST_UTIL_H_
