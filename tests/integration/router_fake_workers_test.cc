// The real router (RouterServer, in process) in front of fake prefill and
// decode workers on loopback: what needs real gRPC — the requests workers
// receive and the timings they report, cancels reaching the workers, flow
// control for a slow client, bad input, deadlines, the circuit breaker over
// many requests, workers that hang, die or restart (load reports, channel
// reconnects), admission control, DNS targets and the call's lifetime.
// Each transition of the request state machine itself is table-tested
// without gRPC in tests/unit/router/call/generate_fsm_test.cc.
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/model/model_card.h"
#include "common/model/random_model.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "router/router_server.h"
#include "tests/testing/fake_workers.h"
#include "tests/testing/http_test_client.h"
#include "tests/testing/temp_dir.h"

namespace pdserve::router {
namespace {

using test::FakeDecodeWorker;
using test::FakeKvBus;
using test::FakePrefillWorker;

constexpr int kContext = 16384;

struct Outcome {
  grpc::Status status;
  std::vector<v1::GenerateResponse> responses;
  std::string text;
  std::vector<int32_t> token_ids;
  v1::Started started;
  v1::Finished finished;
  bool has_finished = false;
};

class RouterFakeWorkersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_path_ =
        new std::string(pdserve::testing::TestTempDir("router-fake-workers-test") + "/model.gguf");
    RandomModelSpec spec;
    spec.context_length = kContext;  // only the router's tokenizer reads it
    ASSERT_TRUE(WriteRandomModelGguf(spec, *model_path_).ok());
    auto model = ModelCard::Load(*model_path_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete model_path_;
  }

  std::vector<int32_t> Encode(const std::string& text) {
    return model_->tokenizer().Encode(text, /*parse_special=*/false);
  }
  FakeDecodeWorker::Options DecodeOptions(const std::string& output) {
    FakeDecodeWorker::Options o;
    o.fingerprint = model_->fingerprint();
    o.output = Encode(output);
    return o;
  }
  FakePrefillWorker::Options PrefillOptions() {
    FakePrefillWorker::Options o;
    o.fingerprint = model_->fingerprint();
    return o;
  }
  // Silent on its first prefill, as under SIGSTOP.
  FakePrefillWorker::Options FrozenPrefillOptions() {
    FakePrefillWorker::Options o = PrefillOptions();
    o.freeze = true;
    return o;
  }

  // Starts the router and waits until every worker is usable in its view.
  void StartRouter(const std::vector<std::string>& decode, const std::vector<std::string>& prefill,
                   RouterConfig config = {}) {
    config.listen = "127.0.0.1:0";
    config.http_listen = "127.0.0.1:0";  // any free port, never the default 8000
    config.model_path = *model_path_;
    config.decode_addresses = decode;
    config.prefill_addresses = prefill;
    config.load_poll_ms = 20;
    auto router = RouterServer::Start(config);
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (absl::Now() < until) {
      auto snap = router_->registry().snapshot();
      int usable = 0;
      for (const auto* tier : {&snap->decode, &snap->prefill}) {
        for (const WorkerState& w : *tier) usable += IsUsable(w, snap->stale_after, absl::Now());
      }
      if (usable == static_cast<int>(decode.size() + prefill.size())) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(router_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Generation::NewStub(channel_);
  }

  Outcome Generate(const v1::GenerateRequest& request,
                   absl::Duration deadline = absl::Seconds(20)) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    Outcome out;
    auto reader = stub_->Generate(&ctx, request);
    v1::GenerateResponse r;
    while (reader->Read(&r)) {
      out.responses.push_back(r);
      if (r.has_started()) out.started = r.started();
      if (r.has_chunk()) {
        out.text += r.chunk().text();
        out.token_ids.insert(out.token_ids.end(), r.chunk().token_ids().begin(),
                             r.chunk().token_ids().end());
      }
      if (r.has_finished()) {
        out.finished = r.finished();
        out.has_finished = true;
      }
    }
    out.status = reader->Finish();
    return out;
  }

  static v1::GenerateRequest Text(const std::string& text, int max_tokens = 64) {
    v1::GenerateRequest r;
    r.set_text(text);
    r.set_max_tokens(max_tokens);
    return r;
  }

  // Polls `pred` for up to 5 s.
  template <typename Pred>
  static bool Eventually(Pred pred) {
    const absl::Time until = absl::Now() + absl::Seconds(5);
    while (absl::Now() < until) {
      if (pred()) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return pred();
  }

  static std::string* model_path_;
  // `requests` requests to a cluster with a prefill worker that fails
  // every prefill with `code` and a healthy one (ejection only skips a
  // worker while another is usable); how many reached the failing one.
  int FailingPrefillCalls(grpc::StatusCode code, int requests) {
    FakeDecodeWorker d(DecodeOptions("hello"), &bus_);
    auto failing = PrefillOptions();
    failing.fail = true;
    failing.fail_code = code;
    FakePrefillWorker bad(failing, &bus_);
    FakePrefillWorker good(PrefillOptions(), &bus_);
    StartRouter({d.address()}, {bad.address(), good.address()});
    for (int i = 0; i < requests; ++i) {
      const Outcome out = Generate(Text("go"));
      EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    }
    router_.reset();
    return bad.prefill_calls();
  }

  // A 6-token request placed on a decode worker with `broken` options
  // (least_loaded picks it: the healthy second one has fewer free blocks).
  struct FailoverRun {
    Outcome out;
    v1::DecodeRequest moved;  // what the healthy worker was asked last
    std::string broken_address, healthy_address;
    int broken_cancelled = 0;  // a hung worker's streams cancelled by the router
  };
  FailoverRun RunFailover(FakeDecodeWorker::Options broken) {
    const bool hangs = broken.freeze_after >= 0;  // the router cancels its stream
    FakeDecodeWorker d1(std::move(broken), &bus_);
    auto healthy = DecodeOptions("abcdefgh");
    healthy.free_blocks = 50;
    FakeDecodeWorker d2(healthy, &bus_);
    StartRouter({d1.address(), d2.address()}, {});
    v1::GenerateRequest request = Text("go", 6);
    request.set_return_token_ids(true);
    FailoverRun run;
    run.out = Generate(request);
    run.moved = d2.last_request();
    run.broken_address = d1.address();
    run.healthy_address = d2.address();
    if (hangs) Eventually([&] { return d1.cancelled_calls() > 0; });
    run.broken_cancelled = d1.cancelled_calls();
    router_.reset();
    return run;
  }

  // Migration: the worker placed first (most free blocks) drains after 3
  // tokens; the target has fewer free blocks.
  FakeDecodeWorker::Options DrainingOptions() {
    auto o = DecodeOptions("abcdefgh");
    o.offer_after = 3;
    return o;
  }
  FakeDecodeWorker::Options TargetOptions() {
    auto o = DecodeOptions("abcdefgh");
    o.free_blocks = 50;
    return o;
  }
  // A 6-token request; expects it to end OK with the first six tokens of
  // "abcdefgh", none lost or repeated.
  Outcome GenerateSixTokens() {
    v1::GenerateRequest request = Text("go", 6);
    request.set_return_token_ids(true);
    Outcome out = Generate(request);
    EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    const std::vector<int32_t> all = Encode("abcdefgh");
    EXPECT_EQ(out.token_ids, std::vector<int32_t>(all.begin(), all.begin() + 6));
    return out;
  }

  static ModelCard* model_;
  FakeKvBus bus_;
  std::unique_ptr<RouterServer> router_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

std::string* RouterFakeWorkersTest::model_path_ = nullptr;
ModelCard* RouterFakeWorkersTest::model_ = nullptr;

TEST_F(RouterFakeWorkersTest, RemotePrefillStreamsTextAndTimings) {
  auto d_options = DecodeOptions("Hello world");
  d_options.cached_prefix_tokens = 16;
  FakeDecodeWorker d(d_options, &bus_);
  FakePrefillWorker p(PrefillOptions(), &bus_);
  StartRouter({d.address()}, {p.address()});

  v1::GenerateRequest request = Text("tell me");
  request.set_return_token_ids(true);
  const Outcome out = Generate(request);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_FALSE(out.responses.empty());
  ASSERT_TRUE(out.responses.front().has_started());
  EXPECT_EQ(out.started.decode_worker(), d.address());
  EXPECT_EQ(out.started.prefill_worker(), p.address());
  EXPECT_EQ(out.started.prompt_tokens(), static_cast<int>(Encode("tell me").size()));
  EXPECT_FALSE(out.started.request_id().empty());
  EXPECT_EQ(out.text, "Hello world");
  EXPECT_EQ(out.token_ids, Encode("Hello world"));
  ASSERT_TRUE(out.has_finished);
  EXPECT_TRUE(out.responses.back().has_finished());
  EXPECT_EQ(out.finished.reason(), v1::FINISH_REASON_EOS);
  EXPECT_EQ(out.finished.usage().completion_tokens(),
            static_cast<int>(Encode("Hello world").size()));
  EXPECT_EQ(out.finished.usage().cached_prompt_tokens(), 16);
  const v1::Timings& t = out.finished.timings();
  EXPECT_EQ(t.prefill_mode(), "remote");
  EXPECT_EQ(t.prefill_compute_ms(), 7.0);
  EXPECT_EQ(t.kv_transfer_bytes(), 4096u);
  EXPECT_EQ(t.decode_admission_ms(), 1.5);
  EXPECT_GT(t.ttft_ms(), 0.0);
  const v1::Placement& placed = out.finished.placement();
  EXPECT_EQ(placed.decode_worker(), d.address());
  EXPECT_EQ(placed.prefill_worker(), p.address());
  EXPECT_EQ(placed.prefill_attempts(), 1u);
  EXPECT_EQ(placed.decode_failovers(), 0u);
  EXPECT_GE(t.e2e_ms(), t.ttft_ms());

  const v1::DecodeRequest dr = d.last_request();
  EXPECT_FALSE(dr.local_prefill());
  EXPECT_EQ(dr.kv_wait_ms(), RouterConfig().kv_wait_ms);
  const v1::PrefillRequest pr = p.last_request();
  EXPECT_EQ(pr.request_id(), out.started.request_id());
  EXPECT_EQ(pr.target().epoch(), 1u);
  EXPECT_EQ(pr.target().skip_prefix_tokens(), 16u);
  EXPECT_EQ(pr.target().kv_endpoint(), "127.0.0.1:1");
  EXPECT_EQ(pr.target().kv_layout().block_size(), 16u);
}

TEST_F(RouterFakeWorkersTest, PrefillsLocallyWithoutAPrefillTier) {
  FakeDecodeWorker d(DecodeOptions("abc"), &bus_);
  StartRouter({d.address()}, {});
  v1::GenerateRequest request = Text("hi", 2);
  request.set_request_id("my-request-1");
  const Outcome out = Generate(request);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.started.request_id(), "my-request-1");
  EXPECT_EQ(out.started.prefill_worker(), "");
  EXPECT_TRUE(d.last_request().local_prefill());
  EXPECT_EQ(out.finished.timings().prefill_mode(), "local");
  EXPECT_EQ(out.finished.placement().prefill_worker(), "");
  EXPECT_EQ(out.finished.placement().prefill_attempts(), 0u);
  EXPECT_EQ(out.finished.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(out.finished.usage().completion_tokens(), 2);
}

// usage.cached_prompt_tokens is the decode worker's hit on either path.
TEST_F(RouterFakeWorkersTest, LocalPrefillReportsTheDecodeWorkersCacheHit) {
  auto options = DecodeOptions("abc");
  options.cached_prefix_tokens = 3;
  FakeDecodeWorker d(options, &bus_);
  StartRouter({d.address()}, {});
  const Outcome out = Generate(Text("tell me"));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.finished.timings().prefill_mode(), "local");
  EXPECT_EQ(out.finished.timings().prefill_cached_tokens(), 3u);
  EXPECT_EQ(out.finished.usage().cached_prompt_tokens(), 3);
}

TEST_F(RouterFakeWorkersTest, ShortPromptsAndColocatedModePrefillLocally) {
  FakeDecodeWorker d(DecodeOptions("ok"), &bus_);
  FakePrefillWorker p(PrefillOptions(), &bus_);
  RouterConfig config;
  config.local_prefill_max_tokens = 4;
  StartRouter({d.address()}, {p.address()}, config);
  EXPECT_TRUE(Generate(Text("hi")).status.ok());
  EXPECT_TRUE(d.last_request().local_prefill());
  EXPECT_TRUE(Generate(Text("a much longer prompt than four tokens")).status.ok());
  EXPECT_FALSE(d.last_request().local_prefill());
  EXPECT_EQ(p.prefill_calls(), 1);
}

TEST_F(RouterFakeWorkersTest, StopStringEndsTheStreamAndCancelsDecode) {
  // A long tail, so that the stream is still running when the stop string's
  // cancel reaches the decode worker, however late (~2 s of slack).
  std::string text = "one two.";
  for (int i = 0; i < 100; ++i) text += " more";
  auto options = DecodeOptions(text);
  options.token_delay = absl::Milliseconds(20);
  FakeDecodeWorker d(options, &bus_);
  StartRouter({d.address()}, {});
  v1::GenerateRequest request = Text("count");
  request.add_stop(".");
  const Outcome out = Generate(request);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.text, "one two");
  EXPECT_EQ(out.finished.reason(), v1::FINISH_REASON_STOP);
  EXPECT_TRUE(Eventually([&] { return d.cancelled_calls() == 1; }));
}

TEST_F(RouterFakeWorkersTest, BadInputIsRejectedAndTheRouterKeepsServing) {
  FakeDecodeWorker d(DecodeOptions("ok"), &bus_);
  StartRouter({d.address()}, {});
  struct Bad {
    v1::GenerateRequest request;
    grpc::StatusCode code;
  };
  std::vector<Bad> bad;
  bad.push_back({v1::GenerateRequest(), grpc::StatusCode::INVALID_ARGUMENT});
  bad.push_back({Text(""), grpc::StatusCode::INVALID_ARGUMENT});
  bad.push_back({Text("x", -1), grpc::StatusCode::INVALID_ARGUMENT});
  bad.push_back({Text("x", 5000), grpc::StatusCode::OUT_OF_RANGE});  // > --max_tokens_limit
  v1::GenerateRequest long_prompt = Text("x", 500);
  for (int i = 0; i < kContext - 100; ++i) long_prompt.mutable_tokens()->add_ids(7);
  bad.push_back({long_prompt, grpc::StatusCode::OUT_OF_RANGE});  // beyond the context
  v1::GenerateRequest nan = Text("x");
  nan.mutable_sampling()->set_temperature(std::numeric_limits<float>::quiet_NaN());
  bad.push_back({nan, grpc::StatusCode::INVALID_ARGUMENT});
  v1::GenerateRequest ids = Text("x");
  ids.mutable_tokens()->add_ids(1 << 30);
  bad.push_back({ids, grpc::StatusCode::INVALID_ARGUMENT});
  v1::GenerateRequest chat;
  chat.mutable_chat()->add_messages()->set_role("nobody");
  bad.push_back({chat, grpc::StatusCode::INVALID_ARGUMENT});
  for (const Bad& b : bad) {
    const Outcome out = Generate(b.request);
    EXPECT_EQ(out.status.error_code(), b.code) << out.status.error_message();
    EXPECT_FALSE(out.status.error_message().empty());
    EXPECT_TRUE(out.responses.empty());
  }
  EXPECT_EQ(d.decode_calls(), 0);
  const Outcome good = Generate(Text("fine"));
  EXPECT_TRUE(good.status.ok()) << good.status.error_message();
  EXPECT_EQ(good.text, "ok");
}

// Bodies that are not the method's message never reach our handlers with
// typed gRPC methods (gRPC answers a bare UNIMPLEMENTED); the raw methods
// answer INVALID_ARGUMENT naming the message type.
TEST_F(RouterFakeWorkersTest, MalformedBodiesAreInvalidArgumentAndTheRouterKeepsServing) {
  FakeDecodeWorker d(DecodeOptions("ok"), &bus_);
  StartRouter({d.address()}, {});
  const int text_field = v1::GenerateRequest::descriptor()->FindFieldByName("text")->number();
  const std::string not_utf8 = {static_cast<char>(text_field << 3 | 2), 2, '\xff', '\xfe'};
  const std::string not_protobuf = "\xff\xff\xff\xff\xff";
  struct Case {
    std::string method;
    std::string body;
    std::string type;
  };
  const std::vector<Case> cases = {
      {"Generate", not_protobuf, "pdserve.v1.GenerateRequest"},
      {"Generate", not_utf8, "pdserve.v1.GenerateRequest"},
      {"Tokenize", not_utf8, "pdserve.v1.TokenizeRequest"},
      {"GetModelInfo", not_protobuf, "pdserve.v1.GetModelInfoRequest"},
  };
  grpc::GenericStub generic(channel_);
  for (const Case& c : cases) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    grpc::Slice slice(c.body);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    generic.UnaryCall(&ctx, "/pdserve.v1.Generation/" + c.method, grpc::StubOptions(), &request,
                      &response, [&done](grpc::Status s) { done.set_value(std::move(s)); });
    const grpc::Status status = done.get_future().get();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.method;
    EXPECT_NE(status.error_message().find(c.type), std::string::npos) << status.error_message();
  }
  EXPECT_EQ(d.decode_calls(), 0);
  EXPECT_EQ(router_->service().calls_in_flight(), 0);
  const Outcome good = Generate(Text("fine"));
  EXPECT_TRUE(good.status.ok()) << good.status.error_message();
  EXPECT_EQ(good.text, "ok");
}

// A client that stops reading makes the router's writes wait on HTTP/2 flow
// control; the router then pauses reading the decode stream and resumes
// when the client drains. Nothing may be lost, duplicated or reordered.
TEST_F(RouterFakeWorkersTest, SlowClientGetsEveryTokenInOrder) {
  std::string expected;
  for (int i = 0; i < 12000; ++i) expected += static_cast<char>('a' + (i * 7) % 26);
  auto options = DecodeOptions(expected);
  options.token_delay = absl::ZeroDuration();
  FakeDecodeWorker d(options, &bus_);
  RouterConfig config;
  config.max_tokens_limit = kContext - 100;
  StartRouter({d.address()}, {}, config);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  auto slow = v1::Generation::NewStub(grpc::CreateCustomChannel(
      "127.0.0.1:" + std::to_string(router_->port()), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  v1::GenerateRequest request = Text("go", kContext - 100);
  request.set_return_token_ids(true);
  auto reader = slow->Generate(&ctx, request);
  absl::SleepFor(absl::Milliseconds(500));  // let everything pile up
  std::string text;
  std::vector<int32_t> ids;
  v1::GenerateResponse r;
  while (reader->Read(&r)) {
    text += r.chunk().text();
    ids.insert(ids.end(), r.chunk().token_ids().begin(), r.chunk().token_ids().end());
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(text, expected);
  EXPECT_EQ(ids, Encode(expected));
}

TEST_F(RouterFakeWorkersTest, ClientCancelReachesDecodeWorker) {
  auto options = DecodeOptions(std::string(200, 'a'));
  options.token_delay = absl::Milliseconds(20);
  FakeDecodeWorker d(options, &bus_);
  StartRouter({d.address()}, {});
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, Text("go", 200));
  v1::GenerateResponse r;
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_TRUE(r.has_started());
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_TRUE(r.has_chunk());
  ctx.TryCancel();
  while (reader->Read(&r)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(Eventually([&] { return d.cancelled_calls() == 1; }));
  EXPECT_TRUE(Eventually([&] { return router_->service().calls_in_flight() == 0; }));
}

TEST_F(RouterFakeWorkersTest, ClientDeadlineEndsAStuckRequestInTime) {
  auto options = DecodeOptions("x");
  options.hang = true;
  FakeDecodeWorker d(options, &bus_);
  StartRouter({d.address()}, {});
  const absl::Time start = absl::Now();
  const Outcome out = Generate(Text("go"), absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(took, absl::Seconds(3));
  EXPECT_TRUE(Eventually([&] { return d.cancelled_calls() == 1; }));
}

TEST_F(RouterFakeWorkersTest, RouterTimeoutCapsRequestsWithoutDeadline) {
  auto options = DecodeOptions("x");
  options.hang = true;
  FakeDecodeWorker d(options, &bus_);
  RouterConfig config;
  config.request_timeout_ms = 300;
  StartRouter({d.address()}, {}, config);
  const Outcome out = Generate(Text("go"), absl::Seconds(30));
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(out.status.error_message().find(d.address()), std::string::npos);
}

// The load gauges a Gateway's endpoint picker and the routers' autoscaler
// read: requests waiting for a first token, requests streaming, and the
// share of the decode pool's KV blocks in use.
TEST_F(RouterFakeWorkersTest, GaugesShowWaitingAndRunningRequestsAndDecodeKvUse) {
  auto gauge = [this](const std::string& name) {
    const pdserve::testing::HttpResult r = pdserve::testing::HttpCall(
        absl::StrCat("127.0.0.1:", router_->metrics_port()), "GET", "/metrics");
    const size_t at = r.body.find("\n" + name + " ");
    return at == std::string::npos ? -1.0
                                   : std::strtod(r.body.c_str() + at + name.size() + 2, nullptr);
  };
  RouterConfig config;
  config.metrics_port = -1;  // any free port
  {
    auto options = DecodeOptions("x");
    options.hang = true;  // reserved, never a token: the request waits
    options.free_blocks = 1 << 18;  // of 1 << 20
    FakeDecodeWorker d(options, &bus_);
    StartRouter({d.address()}, {}, config);
    EXPECT_TRUE(Eventually([&] { return gauge("pdserve_router_decode_kv_utilization") == 0.75; }));
    std::thread waiting([&] { Generate(Text("go"), absl::Seconds(2)); });
    EXPECT_TRUE(Eventually([&] { return gauge("pdserve_router_requests_waiting") == 1; }));
    EXPECT_EQ(gauge("pdserve_router_requests_running"), 0);
    waiting.join();
    EXPECT_TRUE(Eventually([&] { return gauge("pdserve_router_requests_waiting") == 0; }));
    router_.reset();
  }
  auto options = DecodeOptions("abcdefghijklmnopqrstuvwxyz");
  options.token_delay = absl::Milliseconds(100);  // streams for ~2.6 s
  FakeDecodeWorker d(options, &bus_);
  StartRouter({d.address()}, {}, config);
  std::thread a([&] { EXPECT_TRUE(Generate(Text("go")).status.ok()); });
  std::thread b([&] { EXPECT_TRUE(Generate(Text("go")).status.ok()); });
  EXPECT_TRUE(Eventually([&] { return gauge("pdserve_router_requests_running") == 2; }));
  EXPECT_EQ(gauge("pdserve_router_requests_waiting"), 0);
  a.join();
  b.join();
  EXPECT_TRUE(Eventually([&] {
    return gauge("pdserve_router_requests_running") == 0 &&
           gauge("pdserve_router_requests_waiting") == 0;
  }));
}

TEST_F(RouterFakeWorkersTest, DecodeDyingMidStreamIsUnavailable) {
  auto options = DecodeOptions("abcdefgh");
  options.die_after = 3;
  FakeDecodeWorker d(options, &bus_);
  StartRouter({d.address()}, {});
  const Outcome out = Generate(Text("go"));
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(out.status.error_message().find("decode worker crashed"), std::string::npos);
  EXPECT_EQ(out.text, "abc");
}

TEST_F(RouterFakeWorkersTest, FailedPrefillIsRetriedOnAnotherPrefillWorkerUnderANewEpoch) {
  FakeDecodeWorker d(DecodeOptions("hello"), &bus_);
  auto fail = PrefillOptions();
  fail.fail = true;
  FakePrefillWorker p1(fail, &bus_);
  auto busy = PrefillOptions();
  busy.queued_prompt_tokens = 1000;  // least_loaded tries p1 first
  FakePrefillWorker p2(busy, &bus_);
  StartRouter({d.address()}, {p1.address(), p2.address()});
  const Outcome out = Generate(Text("go"));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.text, "hello");
  EXPECT_EQ(out.finished.timings().prefill_mode(), "remote");
  EXPECT_EQ(p1.prefill_calls(), 1);
  EXPECT_EQ(p2.prefill_calls(), 1);
  EXPECT_EQ(d.retry_calls(), 1);
  EXPECT_EQ(d.decode_calls(), 1);  // the reservation was kept
  EXPECT_EQ(p1.last_request().target().epoch(), 1u);
  EXPECT_EQ(p2.last_request().target().epoch(), 2u);
  EXPECT_EQ(p2.last_request().target().transfer_id(), p1.last_request().target().transfer_id());
  int started = 0;
  for (const auto& r : out.responses) started += r.has_started();
  EXPECT_EQ(started, 1);
  // Started names the first prefill worker; Finished the one whose KV was used.
  EXPECT_EQ(out.started.prefill_worker(), p1.address());
  EXPECT_EQ(out.finished.placement().prefill_worker(), p2.address());
  EXPECT_EQ(out.finished.placement().prefill_attempts(), 2u);
}

TEST_F(RouterFakeWorkersTest, PrefillFailingAfterItsCommitStillCompletes) {
  FakeDecodeWorker d(DecodeOptions("hello"), &bus_);
  auto lost_ack = PrefillOptions();
  lost_ack.fail_after_commit = true;
  FakePrefillWorker p1(lost_ack, &bus_);
  auto busy = PrefillOptions();
  busy.queued_prompt_tokens = 1000;  // least_loaded tries p1 first
  FakePrefillWorker p2(busy, &bus_);
  StartRouter({d.address()}, {p1.address(), p2.address()});
  // Whether the router sees the failure before or after the first token,
  // the decode worker has the KV and the request completes on it: a retry
  // either finds the reservation committed (NOT_FOUND: the stream decides)
  // or, in the moment before the commit is processed, re-sends the KV.
  for (int i = 0; i < 5; ++i) {
    const Outcome out = Generate(Text("go"));
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.text, "hello");
    EXPECT_EQ(out.finished.timings().prefill_mode(), "remote");
  }
  EXPECT_EQ(d.decode_calls(), 5);
}

// The circuit breaker (3 consecutive failures by default) counts what says
// the worker broke, not its verdicts on requests: a prefill worker whose
// pool cannot hold some prompts keeps getting requests.
TEST_F(RouterFakeWorkersTest, RequestVerdictsDoNotEjectAPrefillWorker) {
  EXPECT_GT(FailingPrefillCalls(grpc::StatusCode::RESOURCE_EXHAUSTED, 12), 3);
}

// The contrast: one that keeps failing as if it were down is ejected.
TEST_F(RouterFakeWorkersTest, RepeatedUnavailablePrefillsEjectTheWorker) {
  EXPECT_EQ(FailingPrefillCalls(grpc::StatusCode::UNAVAILABLE, 12), 3);
}

// A prompt whose prefill takes far longer than the attempt timeout is not
// timed out while its worker keeps computing (and its KV keeps arriving):
// the timeout is for a worker that stops making progress.
TEST_F(RouterFakeWorkersTest, ALongPrefillThatKeepsComputingIsNotTimedOut) {
  FakeDecodeWorker d(DecodeOptions("x"), &bus_);
  auto slow = PrefillOptions();
  slow.compute = absl::Milliseconds(3000);
  FakePrefillWorker p(slow, &bus_);
  RouterConfig config;
  config.kv_wait_ms = 2000;
  config.prefill_attempt_timeout_ms = 800;  // an attempt with no progress for 800 ms ends
  config.prefill_retries = 0;
  StartRouter({d.address()}, {p.address()}, config);
  const Outcome out = Generate(Text("go"));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.text, "x");
  EXPECT_EQ(p.prefill_calls(), 1);
  EXPECT_EQ(p.cancelled_calls(), 0);
  // It must start within the same window, or be refused at once.
  EXPECT_EQ(p.last_request().start_within_ms(), 800u);
}

// One that stops computing while its server still answers and reports
// load (a wedged engine) is given up on and retried elsewhere.
TEST_F(RouterFakeWorkersTest, AStalledPrefillIsGivenUpOnAndRetried) {
  FakeDecodeWorker d(DecodeOptions("x"), &bus_);
  auto stalled = PrefillOptions();
  stalled.compute = absl::Seconds(60);
  stalled.stalls = true;
  FakePrefillWorker p1(stalled, &bus_);
  auto busier = PrefillOptions();
  busier.queued_prompt_tokens = 1000;  // least_loaded picks the stalled one first
  FakePrefillWorker p2(busier, &bus_);
  RouterConfig config;
  config.kv_wait_ms = 3000;
  config.prefill_attempt_timeout_ms = 300;  // well within the decode worker's wait
  StartRouter({d.address()}, {p1.address(), p2.address()}, config);
  const Outcome out = Generate(Text("go"));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.text, "x");
  EXPECT_EQ(p1.prefill_calls(), 1);
  EXPECT_EQ(p2.prefill_calls(), 1);
  EXPECT_TRUE(Eventually([&] { return p1.cancelled_calls() == 1; }));
}

// A stopped prefill worker (SIGSTOP) is given up on as soon as its load
// reports stop, not after the attempt timeout, here longer than the
// client's deadline: the retry on the healthy worker must finish first.
TEST_F(RouterFakeWorkersTest, ASilentPrefillWorkerIsAbandonedBeforeTheAttemptTimeout) {
  FakeDecodeWorker d(DecodeOptions("x"), &bus_);
  FakePrefillWorker p1(FrozenPrefillOptions(), &bus_);
  auto busier = PrefillOptions();
  busier.queued_prompt_tokens = 1000;  // least_loaded picks the frozen one first
  FakePrefillWorker p2(busier, &bus_);
  RouterConfig config;
  config.kv_wait_ms = 120000;  // the attempt would time out after 90 s
  StartRouter({d.address()}, {p1.address(), p2.address()}, config);
  const Outcome out = Generate(Text("go"), absl::Seconds(30));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.text, "x");
  EXPECT_EQ(p1.prefill_calls(), 1);
  EXPECT_EQ(p2.prefill_calls(), 1);
  EXPECT_TRUE(Eventually([&] { return p1.cancelled_calls() == 1; }));
}

TEST_F(RouterFakeWorkersTest, DecodeDyingMidStreamFailsOverWithoutLostOrRepeatedTokens) {
  auto dying = DecodeOptions("abcdefgh");
  dying.die_after = 3;
  const FailoverRun run = RunFailover(dying);
  ASSERT_TRUE(run.out.status.ok()) << run.out.status.error_message();
  const std::vector<int32_t> all = Encode("abcdefgh");
  ASSERT_GE(all.size(), 6u);
  EXPECT_EQ(run.out.token_ids, std::vector<int32_t>(all.begin(), all.begin() + 6));
  EXPECT_EQ(run.out.finished.usage().completion_tokens(), 6);
  EXPECT_EQ(run.moved.first_index(), 3);
  EXPECT_EQ(run.moved.max_tokens(), 3);
  EXPECT_EQ(run.out.started.decode_worker(), run.broken_address);
  EXPECT_EQ(run.out.finished.placement().decode_worker(), run.healthy_address);
  EXPECT_EQ(run.out.finished.placement().decode_failovers(), 1u);
  EXPECT_TRUE(run.moved.local_prefill());
  const std::vector<int32_t> prompt(run.moved.prompt_tokens().begin(),
                                    run.moved.prompt_tokens().end());
  std::vector<int32_t> want = Encode("go");
  want.insert(want.end(), all.begin(), all.begin() + 3);  // what d1 produced
  EXPECT_EQ(prompt, want);
}

// A draining decode worker offers the stream after 3 tokens: the router
// reserves on the other worker for prompt + the first 2 (first_index 2,
// remote), has the source hand its KV over, and the target's stream goes
// on from token 2 (the duplicate dropped): no recompute.
TEST_F(RouterFakeWorkersTest, ADrainingDecodeWorkersStreamMovesWithItsKv) {
  FakeDecodeWorker d1(DrainingOptions(), &bus_);
  FakeDecodeWorker d2(TargetOptions(), &bus_);
  StartRouter({d1.address(), d2.address()}, {});
  const Outcome out = GenerateSixTokens();
  const std::vector<int32_t> all = Encode("abcdefgh");
  EXPECT_EQ(out.finished.placement().decode_migrations(), 1u);
  EXPECT_EQ(out.finished.placement().decode_failovers(), 0u);
  EXPECT_EQ(out.finished.placement().decode_worker(), d2.address());
  EXPECT_EQ(d1.handoff_calls(), 1);
  const v1::DecodeRequest moved = d2.last_request();
  EXPECT_FALSE(moved.local_prefill());
  EXPECT_TRUE(moved.accepts_migration());
  EXPECT_EQ(moved.first_index(), 2);
  EXPECT_EQ(moved.max_tokens(), 4);
  std::vector<int32_t> want = Encode("go");
  want.insert(want.end(), all.begin(), all.begin() + 2);
  EXPECT_EQ(std::vector<int32_t>(moved.prompt_tokens().begin(), moved.prompt_tokens().end()), want);
}

// The move fails — its target dies after reserving, or the source's push
// breaks — and the stream is recomputed elsewhere from the 3 tokens the
// client has, still without a lost or repeated token.
TEST_F(RouterFakeWorkersTest, AFailedMoveIsRecomputed) {
  for (bool target_dies : {true, false}) {
    SCOPED_TRACE(target_dies ? "the target dies" : "the push breaks");
    auto draining = DrainingOptions();
    draining.fail_handoff = !target_dies;
    FakeDecodeWorker d1(draining, &bus_);
    auto target = TargetOptions();
    target.die_when_reserved = target_dies;
    FakeDecodeWorker d2(target, &bus_);
    auto spare = DecodeOptions("abcdefgh");
    spare.free_blocks = 10;
    FakeDecodeWorker d3(spare, &bus_);
    StartRouter({d1.address(), d2.address(), d3.address()}, {});
    const Outcome out = GenerateSixTokens();
    EXPECT_EQ(out.finished.placement().decode_migrations(), 0u);
    EXPECT_EQ(out.finished.placement().decode_failovers(), 1u);
    // A dead target leaves the spare; a broken push leaves the target free.
    FakeDecodeWorker& recomputed = target_dies ? d3 : d2;
    EXPECT_EQ(out.finished.placement().decode_worker(), recomputed.address());
    const v1::DecodeRequest moved = recomputed.last_request();
    EXPECT_TRUE(moved.local_prefill());
    EXPECT_EQ(moved.first_index(), 3);
    router_.reset();
  }
}

// A stream that breaks after its last token lost only DecodeFinished: the
// request completes on the tokens, where they came from, without a
// failover, and the break still counts against the worker, so three in a
// row eject it (least_loaded would keep choosing it otherwise).
TEST_F(RouterFakeWorkersTest, ALostDecodeFinishedCompletesAndCountsAgainstTheWorker) {
  auto losing = DecodeOptions("abcdef");
  losing.lose_finished = true;
  FakeDecodeWorker d1(losing, &bus_);
  auto healthy = DecodeOptions("abcdef");
  healthy.free_blocks = 50;
  FakeDecodeWorker d2(healthy, &bus_);
  StartRouter({d1.address(), d2.address()}, {});
  const int n = static_cast<int>(Encode("abcdef").size());  // max_tokens: the relay ends there
  for (int i = 0; i < 5; ++i) {
    const Outcome out = Generate(Text("go", n));
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.text, "abcdef");
    EXPECT_EQ(out.finished.reason(), v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(out.finished.placement().decode_failovers(), 0u);
    EXPECT_EQ(out.finished.placement().decode_worker(), i < 3 ? d1.address() : d2.address());
  }
  EXPECT_EQ(d1.decode_calls(), 3);
}

// A decode worker that hangs (SIGSTOP) keeps its stream open but silent,
// load reports included: the watchdog fails the request over within about
// stale_after instead of leaving it to the client's deadline.
TEST_F(RouterFakeWorkersTest, AHungDecodeWorkersStreamFailsOver) {
  auto hanging = DecodeOptions("abcdefgh");
  hanging.freeze_after = 3;
  const FailoverRun run = RunFailover(hanging);
  ASSERT_TRUE(run.out.status.ok()) << run.out.status.error_message();
  const std::vector<int32_t> all = Encode("abcdefgh");
  EXPECT_EQ(run.out.token_ids, std::vector<int32_t>(all.begin(), all.begin() + 6));
  EXPECT_EQ(run.moved.first_index(), 3);
  EXPECT_EQ(run.broken_cancelled, 1);
}

TEST_F(RouterFakeWorkersTest, FailoverWaitsForARestartingDecodeWorker) {
  auto dying = DecodeOptions("abcdefgh");
  dying.die_after = 3;
  FakeDecodeWorker d1(dying, &bus_);
  auto healthy = DecodeOptions("abcdefgh");
  healthy.free_blocks = 50;  // least_loaded places on d1 first
  auto d2 = std::make_unique<FakeDecodeWorker>(healthy, &bus_);
  healthy.port = d2->port();
  const std::string d2_address = d2->address();
  RouterConfig config;
  // Ample for the router to reconnect to the restarted worker even after
  // its channel's back-off grew while the worker was down.
  config.failover_wait_ms = 10000;
  StartRouter({d1.address(), d2_address}, {}, config);
  d2.reset();  // the only other decode worker is down when d1 dies
  ASSERT_TRUE(Eventually([&] {
    auto snap = router_->registry().snapshot();
    for (const WorkerState& w : snap->decode) {
      if (w.address == d2_address) return !IsUsable(w, snap->stale_after, absl::Now());
    }
    return false;
  }));
  std::thread restart([&] {
    absl::SleepFor(absl::Milliseconds(300));
    d2 = std::make_unique<FakeDecodeWorker>(healthy, &bus_);
  });
  v1::GenerateRequest request = Text("go", 6);
  request.set_return_token_ids(true);
  const Outcome out = Generate(request);
  restart.join();
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  const std::vector<int32_t> all = Encode("abcdefgh");
  EXPECT_EQ(out.token_ids, std::vector<int32_t>(all.begin(), all.begin() + 6));
  EXPECT_EQ(d2->last_request().first_index(), 3);
}

TEST_F(RouterFakeWorkersTest, AdmissionIsBounded) {
  auto options = DecodeOptions("x");
  options.hang = true;
  FakeDecodeWorker d(options, &bus_);
  RouterConfig config;
  config.max_queue = 1;
  StartRouter({d.address()}, {}, config);
  grpc::ClientContext first;
  auto reader = stub_->Generate(&first, Text("go"));
  ASSERT_TRUE(Eventually([&] { return d.decode_calls() == 1; }));
  const Outcome second = Generate(Text("go"));
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  first.TryCancel();
  reader->Finish();
  EXPECT_TRUE(Eventually([&] { return router_->service().calls_in_flight() == 0; }));
}

TEST_F(RouterFakeWorkersTest, AWorkerThatGoesAwayLeavesThePoolAndComesBack) {
  auto d = std::make_unique<FakeDecodeWorker>(DecodeOptions("one"), &bus_);
  const std::string address = d->address();
  const int port = d->port();
  StartRouter({address}, {});
  EXPECT_TRUE(Generate(Text("go")).status.ok());
  d.reset();
  const bool gone = Eventually(
      [&] { return Generate(Text("go")).status.error_code() == grpc::StatusCode::UNAVAILABLE; });
  ASSERT_TRUE(gone);
  EXPECT_NE(Generate(Text("go")).status.error_message().find("no live decode worker"),
            std::string::npos);
  auto options = DecodeOptions("two");
  options.port = port;
  d = std::make_unique<FakeDecodeWorker>(options, &bus_);
  ASSERT_EQ(d->address(), address);
  const bool back = Eventually([&] { return Generate(Text("go")).text == "two"; });
  EXPECT_TRUE(back);
}

// A dns:/// target through the real resolver: localhost expands into its
// loopback addresses, and the one with a worker serves.
TEST_F(RouterFakeWorkersTest, DnsTargetServesThroughTheResolvedAddress) {
  FakeDecodeWorker d(DecodeOptions("dns works"), &bus_);
  FakePrefillWorker p(PrefillOptions(), &bus_);
  StartRouter({"dns:///localhost:" + std::to_string(d.port())}, {"dns:" + p.address()});
  const Outcome out = Generate(Text("go"));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.text, "dns works");
  EXPECT_EQ(out.started.prefill_worker(), p.address());
  EXPECT_NE(router_->registry().snapshot()->FindDecode(d.address()), nullptr);
}

// Many requests at once, each ending differently (completion, stop string,
// client cancel mid-stream, client deadline), race every event against
// every other; each must end with its expected status and no call may be
// left behind. Run under ASan this is the lifetime test of GenerateCall.
TEST_F(RouterFakeWorkersTest, ConcurrentRequestsEndingEveryWayAllEnd) {
  // ~1 s streams: a client cancel after a few chunks must come before the
  // stream's end, even with 24 client threads starved of CPU.
  std::string text = "alpha beta. gamma delta epsilon zeta eta theta";
  for (int i = 0; i < 40; ++i) text += " iota";
  auto options = DecodeOptions(text);
  options.token_delay = absl::Milliseconds(20);
  FakeDecodeWorker d1(options, &bus_);
  FakeDecodeWorker d2(options, &bus_);
  FakePrefillWorker p(PrefillOptions(), &bus_);
  StartRouter({d1.address(), d2.address()}, {p.address()});
  constexpr int kThreads = 24;
  std::vector<grpc::StatusCode> codes(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      v1::GenerateRequest request = Text("go");
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(
          absl::Now() + (i % 4 == 3 ? absl::Milliseconds(15) : absl::Seconds(20))));
      if (i % 4 == 1) request.add_stop(".");
      auto reader = stub_->Generate(&ctx, request);
      v1::GenerateResponse r;
      int read = 0;
      while (reader->Read(&r)) {
        if (i % 4 == 2 && ++read == 2 + i % 3) ctx.TryCancel();
      }
      codes[i] = reader->Finish().error_code();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    SCOPED_TRACE(i);
    switch (i % 4) {
      case 0:
      case 1:
        EXPECT_EQ(codes[i], grpc::StatusCode::OK);
        break;
      case 2:
        EXPECT_EQ(codes[i], grpc::StatusCode::CANCELLED);
        break;
      case 3:
        EXPECT_EQ(codes[i], grpc::StatusCode::DEADLINE_EXCEEDED);
        break;
    }
  }
  EXPECT_TRUE(Eventually([&] { return router_->service().calls_in_flight() == 0; }));
}

TEST_F(RouterFakeWorkersTest, TokenizeAndModelInfo) {
  FakeDecodeWorker d(DecodeOptions("x"), &bus_);
  StartRouter({d.address()}, {});
  grpc::ClientContext ctx;
  v1::TokenizeRequest request;
  request.set_text("Hello");
  v1::TokenizeResponse response;
  ASSERT_TRUE(stub_->Tokenize(&ctx, request, &response).ok());
  EXPECT_EQ(std::vector<int32_t>(response.ids().begin(), response.ids().end()),
            model_->tokenizer().Encode("Hello", true));
  std::string joined;
  for (const std::string& piece : response.pieces()) joined += piece;
  EXPECT_EQ(joined, "Hello");

  grpc::ClientContext info_ctx;
  v1::ModelInfo info;
  ASSERT_TRUE(stub_->GetModelInfo(&info_ctx, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.fingerprint(), model_->fingerprint());
  EXPECT_EQ(info.context_length(), kContext);
  EXPECT_EQ(info.vocab_size(), 320);
  EXPECT_EQ(info.kv_layout().block_size(), 16u);
}

// Draining: a request the HTTP front admitted before the drain streams to
// its end within the grace, while a new one, by either door, is refused
// with a status a client retries elsewhere on.
TEST_F(RouterFakeWorkersTest, DrainFinishesHttpRequestsInFlightAndRefusesNewOnes) {
  const std::string text = "one two three four five six seven eight nine ten eleven twelve";
  FakeDecodeWorker::Options o = DecodeOptions(text);
  o.token_delay = absl::Milliseconds(150);
  FakeDecodeWorker d(o, &bus_);
  StartRouter({d.address()}, {});
  const std::string http = absl::StrCat("127.0.0.1:", router_->http_port());
  testing::HttpResult in_flight;
  std::thread client([&] {
    in_flight = testing::HttpCall(http, "POST", "/v1/completions",
                                  R"({"prompt": "tell me", "max_tokens": 64})");
  });
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (router_->service().calls_in_flight() == 0 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(router_->service().calls_in_flight(), 1);
  std::thread drain([&] { router_->Shutdown(absl::Seconds(20)); });
  // Not ready once the drain began; by then admission is closed.
  while (testing::HttpCall(http, "GET", "/ready").status == 200 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const testing::HttpResult refused =
      testing::HttpCall(http, "POST", "/v1/completions", R"({"prompt": "hi"})");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("shutting down"), std::string::npos) << refused.body;
  client.join();
  drain.join();
  EXPECT_EQ(in_flight.status, 200) << in_flight.body;
  EXPECT_NE(in_flight.body.find(text), std::string::npos) << in_flight.body;
}

}  // namespace
}  // namespace pdserve::router
