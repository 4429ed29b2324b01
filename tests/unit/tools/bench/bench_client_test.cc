// The benchmark client against the in-process echo server: every request
// is accounted for, tokens are counted from the stream, pacing and limits
// hold, and failures are recorded rather than lost.
#include "tools/bench/bench_client.h"

#include <gtest/gtest.h>

#include "tools/bench/bench_calibrate.h"
#include "tools/bench/bench_echo_server.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/generation_target.h"

namespace pdserve {
namespace {

class BenchClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EchoGenerationServer>> s = EchoGenerationServer::Start();
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    stub_ = v1::Generation::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    WorkloadOptions w;
    w.input = {8, 32};
    w.output = {4, 12};
    w.vocab_size = EchoGenerationServer::kVocabSize;
    workload_ = std::make_unique<Workload>(*Workload::Create(w));
  }

  std::unique_ptr<EchoGenerationServer> server_;
  std::unique_ptr<v1::Generation::Stub> stub_;
  std::unique_ptr<Workload> workload_;
};

TEST_F(BenchClientTest, ClosedLoopCountsEveryToken) {
  LoadOptions o;
  o.max_concurrency = 4;
  o.num_requests = 20;
  absl::StatusOr<LoadResult> r = RunLoad(stub_.get(), *workload_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->records.size(), 20u);
  for (size_t i = 0; i < r->records.size(); ++i) {
    const RequestRecord& rec = r->records[i];
    EXPECT_EQ(rec.index, static_cast<int64_t>(i));
    EXPECT_EQ(rec.code, absl::StatusCode::kOk) << rec.error;
    EXPECT_EQ(OutputTokens(rec), rec.requested_output_tokens);
    EXPECT_EQ(rec.input_tokens, static_cast<int>(workload_->Make(rec.index).prompt.size()));
    ASSERT_TRUE(Ttft(rec).has_value());
    EXPECT_LE(*Ttft(rec), rec.e2e_ms);
    EXPECT_FALSE(rec.timings.has_value());  // the echo server reports none
  }
  EXPECT_GT(r->duration_s, 0);
}

TEST_F(BenchClientTest, OpenLoopSendsInArrivalOrder) {
  LoadOptions o;
  o.request_rate = 200;
  o.num_requests = 10;
  o.first_index = 100;
  absl::StatusOr<LoadResult> r = RunLoad(stub_.get(), *workload_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->records.size(), 10u);
  EXPECT_EQ(r->records.front().index, 100);
  for (size_t i = 1; i < r->records.size(); ++i) {
    EXPECT_GE(r->records[i].send_s, r->records[i - 1].send_s);
    EXPECT_EQ(r->records[i].code, absl::StatusCode::kOk);
  }
}

TEST_F(BenchClientTest, DurationBoundsTheRun) {
  LoadOptions o;
  o.request_rate = 100;
  o.duration = absl::Milliseconds(200);
  absl::StatusOr<LoadResult> r = RunLoad(stub_.get(), *workload_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->records.empty());
  for (const RequestRecord& rec : r->records) EXPECT_LT(rec.send_s, 0.2);
}

TEST_F(BenchClientTest, FailuresAreRecordedWithTheirCode) {
  // Nothing listens on a port we just stopped using, so every call fails
  // UNAVAILABLE; the run must still account for each one.
  const std::string address = server_->address();
  server_.reset();
  std::unique_ptr<v1::Generation::Stub> dead =
      v1::Generation::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  LoadOptions o;
  o.max_concurrency = 2;
  o.num_requests = 4;
  absl::StatusOr<LoadResult> r = RunLoad(dead.get(), *workload_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->records.size(), 4u);
  const BenchSummary s = SummarizeRun(r->records, r->duration_s, Slo{});
  EXPECT_EQ(s.completed, 0u);
  EXPECT_EQ(s.failed, 4u);
  EXPECT_EQ(s.errors.at("UNAVAILABLE"), 4u);
  EXPECT_FALSE(s.error_example.at("UNAVAILABLE").empty());
}

TEST_F(BenchClientTest, RejectsUnpacedOrUnboundedRuns) {
  LoadOptions o;
  o.num_requests = 1;
  EXPECT_EQ(RunLoad(stub_.get(), *workload_, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.num_requests = 0;
  o.max_concurrency = 1;
  EXPECT_EQ(RunLoad(stub_.get(), *workload_, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(BenchClientTest, RequestCarriesTokensAndAsksForIds) {
  LoadOptions o;
  o.ignore_eos = true;
  o.sampling.set_temperature(0.5f);
  const RequestShape shape = workload_->Make(1);
  const v1::GenerateRequest req = BenchRequest(SpecFor(shape, o));
  EXPECT_EQ(req.tokens().ids_size(), static_cast<int>(shape.prompt.size()));
  EXPECT_EQ(req.max_tokens(), shape.max_tokens);
  EXPECT_TRUE(req.return_token_ids());
  EXPECT_TRUE(req.ignore_eos());
  EXPECT_FLOAT_EQ(req.sampling().temperature(), 0.5f);
}

TEST_F(BenchClientTest, ConversationGoesAsChatEvenInTextMode) {
  WorkloadOptions w;
  w.vocab_size = 1000;
  w.conversation = ConversationKind::kChat;
  absl::StatusOr<Workload> chat = Workload::Create(w);
  ASSERT_TRUE(chat.ok()) << chat.status();
  const RequestShape shape = chat->Make(2);
  const v1::GenerateRequest req = BenchRequest(SpecFor(shape, LoadOptions{}));
  ASSERT_TRUE(req.has_chat());
  ASSERT_EQ(req.chat().messages_size(), static_cast<int>(shape.messages.size()));
  for (int i = 0; i < req.chat().messages_size(); ++i) {
    EXPECT_EQ(req.chat().messages(i).role(), shape.messages[i].role);
    EXPECT_EQ(req.chat().messages(i).content(), shape.messages[i].content);
  }
}

TEST_F(BenchClientTest, ReportAndJsonCarryTheMetrics) {
  LoadOptions o;
  o.max_concurrency = 2;
  o.num_requests = 6;
  absl::StatusOr<LoadResult> r = RunLoad(stub_.get(), *workload_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const Slo slo{1000.0, 1000.0};
  const BenchSummary s = SummarizeRun(r->records, r->duration_s, slo);
  const std::string text = FormatReport({{"router", "echo"}}, s, slo);
  for (const char* want : {"TTFT", "TPOT", "ITL", "E2E", "goodput", "router", "echo"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  const nlohmann::json j = SummaryJson(s, slo);
  EXPECT_EQ(j["completed"], 6);
  EXPECT_EQ(j["good_requests"], 6);
  EXPECT_TRUE(j["ttft_ms"].contains("p99"));
  EXPECT_EQ(RecordsJson(r->records).size(), 6u);
  EXPECT_TRUE(SummaryJson(s, Slo{})["goodput"].is_null());
}

TEST(CalibrateTest, MeasuresTheClientAgainstTheEchoServer) {
  absl::StatusOr<CalibrationResult> r = Calibrate({.requests = 5, .tokens_per_request = 4});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->clock_read_ns, 0);
  EXPECT_EQ(r->summary.completed, 5u);
  EXPECT_EQ(r->summary.output_tokens, 20);
  EXPECT_EQ(r->summary.itl_ms.count, 15u);
}

}  // namespace
}  // namespace pdserve
