// Both workers' gRPC services in process, on a random-weight model, called
// directly (no router): bodies that are not the method's message get
// INVALID_ARGUMENT naming the type and the worker keeps serving; a remote
// prefill driven by hand (Decode -> Reserved -> Prefill -> Tokens) and a
// local one stream well-formed events through the raw methods.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/model/random_model.h"
#include "decode_worker/decode_worker.h"
#include "gtest/gtest.h"
#include "pdserve/v1/worker.grpc.pb.h"
#include "prefill_worker/prefill_worker.h"
#include "tests/testing/temp_dir.h"

namespace pdserve {
namespace {

using decode::DecodeWorker;
using decode::DecodeWorkerConfig;
using prefill::PrefillWorker;
using prefill::PrefillWorkerConfig;

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

class WorkerRpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_path_ = new std::string(testing::TestTempDir("worker-rpc-test") + "/model.gguf");
    ASSERT_TRUE(WriteRandomModelGguf(RandomModelSpec(), *model_path_).ok());
  }
  static void TearDownTestSuite() { delete model_path_; }

  // What both workers' configs share: loopback, one thread, 64 blocks.
  template <typename Config>
  static Config Small(Config c) {
    c.model_path = *model_path_;
    c.listen = "127.0.0.1:0";
    c.runtime.threads = 1;
    c.runtime.kv_blocks = 64;
    c.drain_timeout = absl::Seconds(1);
    return c;
  }

  void SetUp() override {
    DecodeWorkerConfig d = Small(DecodeWorkerConfig());
    d.kv_listen = "127.0.0.1:0";
    auto decode = DecodeWorker::Start(d);
    ASSERT_TRUE(decode.ok()) << decode.status();
    decode_ = std::move(*decode);
    auto prefill = PrefillWorker::Start(Small(PrefillWorkerConfig()));
    ASSERT_TRUE(prefill.ok()) << prefill.status();
    prefill_ = std::move(*prefill);
    decode_channel_ = Channel(decode_->port());
    prefill_channel_ = Channel(prefill_->port());
  }

  void TearDown() override {
    if (prefill_ != nullptr) prefill_->Drain();
    if (decode_ != nullptr) decode_->Drain();
  }

  static std::shared_ptr<grpc::Channel> Channel(int port) {
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                               grpc::InsecureChannelCredentials());
  }

  // `body` sent as the only request message of `method` (unary or
  // server-streaming alike on the wire).
  static grpc::Status CallRaw(const std::shared_ptr<grpc::Channel>& channel,
                              const std::string& method, const std::string& body) {
    grpc::GenericStub stub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(10)));
    grpc::Slice slice(body);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  }

  static v1::DecodeRequest DecodeOf(std::vector<int32_t> prompt, bool local) {
    v1::DecodeRequest r;
    r.set_request_id(local ? "local-1" : "remote-1");
    r.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
    r.set_max_tokens(4);
    r.set_ignore_eos(true);
    r.set_local_prefill(local);
    r.set_kv_wait_ms(20000);
    return r;
  }

  static std::string* model_path_;
  std::unique_ptr<DecodeWorker> decode_;
  std::unique_ptr<PrefillWorker> prefill_;
  std::shared_ptr<grpc::Channel> decode_channel_, prefill_channel_;
};

std::string* WorkerRpcTest::model_path_ = nullptr;

TEST_F(WorkerRpcTest, MalformedBodiesAreInvalidArgumentAndTheWorkersKeepServing) {
  const std::string not_protobuf = "\xff\xff\xff\xff\xff";
  // The message's request_id (a string field) holding bytes that are not UTF-8.
  auto not_utf8 = [](const google::protobuf::Descriptor* d) {
    const int field = d->FindFieldByName("request_id")->number();
    return std::string{static_cast<char>(field << 3 | 2), 2, '\xff', '\xfe'};
  };
  struct Case {
    bool decode;
    std::string method;
    std::string body;
    std::string type;
  };
  const std::vector<Case> cases = {
      {true, "GetInfo", not_protobuf, "pdserve.v1.GetInfoRequest"},
      {true, "GetLoad", not_protobuf, "pdserve.v1.GetLoadRequest"},
      {true, "WatchLoad", not_protobuf, "pdserve.v1.WatchLoadRequest"},
      {true, "Decode", not_protobuf, "pdserve.v1.DecodeRequest"},
      {true, "Decode", not_utf8(v1::DecodeRequest::descriptor()), "pdserve.v1.DecodeRequest"},
      {true, "RetryTransfer", not_protobuf, "pdserve.v1.RetryTransferRequest"},
      {false, "GetInfo", not_protobuf, "pdserve.v1.GetInfoRequest"},
      {false, "GetLoad", not_protobuf, "pdserve.v1.GetLoadRequest"},
      {false, "WatchLoad", not_protobuf, "pdserve.v1.WatchLoadRequest"},
      {false, "Prefill", not_protobuf, "pdserve.v1.PrefillRequest"},
      {false, "Prefill", not_utf8(v1::PrefillRequest::descriptor()), "pdserve.v1.PrefillRequest"},
  };
  for (const Case& c : cases) {
    const std::string method =
        std::string(c.decode ? "/pdserve.v1.DecodeWorker/" : "/pdserve.v1.PrefillWorker/") +
        c.method;
    const grpc::Status s = CallRaw(c.decode ? decode_channel_ : prefill_channel_, method, c.body);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_NE(s.error_message().find(c.type), std::string::npos) << s.error_message();
  }
  for (const auto& channel : {decode_channel_, prefill_channel_}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(10)));
    v1::WorkerInfo info;
    const grpc::Status s =
        channel == decode_channel_
            ? v1::DecodeWorker::NewStub(channel)->GetInfo(&ctx, v1::GetInfoRequest(), &info)
            : v1::PrefillWorker::NewStub(channel)->GetInfo(&ctx, v1::GetInfoRequest(), &info);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(info.role(),
              channel == decode_channel_ ? v1::WORKER_ROLE_DECODE : v1::WORKER_ROLE_PREFILL);
  }
}

TEST_F(WorkerRpcTest, WatchLoadStreamsReportsUntilCancelled) {
  auto stub = v1::DecodeWorker::NewStub(decode_channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(absl::Seconds(10)));
  v1::WatchLoadRequest request;
  request.set_interval_ms(10);
  auto reader = stub->WatchLoad(&ctx, request);
  v1::LoadReport report;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(reader->Read(&report)) << "report " << i;
    EXPECT_EQ(report.kv_blocks_total(), 64u);
  }
  ctx.TryCancel();
  while (reader->Read(&report)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

// Reads a Decode stream's token ids until it ends; the first event must be
// `first` (kReserved or kTokens).
struct DecodeRun {
  std::vector<int32_t> ids;
  v1::DecodeFinished finished;
  grpc::Status status;
};

DecodeRun ReadTokens(grpc::ClientReader<v1::DecodeEvent>* reader) {
  DecodeRun run;
  v1::DecodeEvent event;
  while (reader->Read(&event)) {
    if (event.has_tokens()) {
      EXPECT_EQ(event.tokens().first_index(), static_cast<int>(run.ids.size()));
      run.ids.insert(run.ids.end(), event.tokens().ids().begin(), event.tokens().ids().end());
    }
    if (event.has_finished()) run.finished = event.finished();
  }
  run.status = reader->Finish();
  return run;
}

TEST_F(WorkerRpcTest, RemoteAndLocalPrefillGiveTheSameGreedyTokens) {
  const std::vector<int32_t> prompt = {5, 17, 42, 99,  7,   250, 31, 64, 12, 8,
                                       3, 77, 19, 200, 150, 33,  21, 90, 45};
  auto decode = v1::DecodeWorker::NewStub(decode_channel_);

  grpc::ClientContext local_ctx;
  local_ctx.set_deadline(In(absl::Seconds(60)));
  auto local_reader = decode->Decode(&local_ctx, DecodeOf(prompt, /*local=*/true));
  const DecodeRun local = ReadTokens(local_reader.get());
  ASSERT_TRUE(local.status.ok()) << local.status.error_message();
  EXPECT_EQ(local.ids.size(), 4u);
  EXPECT_EQ(local.finished.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(local.finished.timings().prefill_mode(), "local");

  grpc::ClientContext remote_ctx;
  remote_ctx.set_deadline(In(absl::Seconds(60)));
  auto remote_reader = decode->Decode(&remote_ctx, DecodeOf(prompt, /*local=*/false));
  v1::DecodeEvent first;
  ASSERT_TRUE(remote_reader->Read(&first));
  ASSERT_TRUE(first.has_reserved());
  const v1::Reserved& reserved = first.reserved();
  EXPECT_EQ(reserved.epoch(), 1u);

  v1::PrefillRequest pr;
  pr.set_request_id("remote-1");
  pr.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  v1::KvTarget* target = pr.mutable_target();
  target->set_kv_endpoint(reserved.kv_endpoint());
  target->set_transfer_id(reserved.transfer_id());
  target->set_epoch(reserved.epoch());
  *target->mutable_kv_layout() = reserved.kv_layout();
  target->set_skip_prefix_tokens(reserved.cached_prefix_tokens());
  *target->mutable_kv_transports() = reserved.kv_transports();
  target->set_kv_host_id(reserved.kv_host_id());
  grpc::ClientContext prefill_ctx;
  prefill_ctx.set_deadline(In(absl::Seconds(60)));
  v1::PrefillResponse answer;
  const grpc::Status ps =
      v1::PrefillWorker::NewStub(prefill_channel_)->Prefill(&prefill_ctx, pr, &answer);
  ASSERT_TRUE(ps.ok()) << ps.error_message();
  EXPECT_GT(answer.kv_transfer_bytes(), 0u);

  const DecodeRun remote = ReadTokens(remote_reader.get());
  ASSERT_TRUE(remote.status.ok()) << remote.status.error_message();
  EXPECT_EQ(remote.finished.timings().prefill_mode(), "remote");
  ASSERT_FALSE(remote.ids.empty());
  EXPECT_EQ(remote.ids.front(), answer.first_token());
  // The decode worker's prefix cache may hold the local run's blocks; the
  // tokens must not depend on where the KV came from.
  EXPECT_EQ(remote.ids, local.ids);
}

// A remote-prefill stream cancelled while its reservation waits for KV: the
// blocks go back to the pool once the receiver has let go of them (the
// engine takes them from the sequence and frees them in the epoch's
// OnKvDone), and the worker reports no pending transfer.
TEST_F(WorkerRpcTest, ACancelWhileAwaitingKvGivesTheBlocksBack) {
  auto decode = v1::DecodeWorker::NewStub(decode_channel_);
  auto load = [&decode]() {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(10)));
    v1::LoadReport report;
    const grpc::Status s = decode->GetLoad(&ctx, v1::GetLoadRequest(), &report);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return report;
  };
  grpc::ClientContext ctx;
  ctx.set_deadline(In(absl::Seconds(60)));
  auto reader = decode->Decode(&ctx, DecodeOf({5, 17, 42, 99, 7, 250, 31}, /*local=*/false));
  v1::DecodeEvent first;
  ASSERT_TRUE(reader->Read(&first));
  ASSERT_TRUE(first.has_reserved());
  const v1::LoadReport reserved = load();
  EXPECT_GT(reserved.kv_blocks_used(), 0u);
  EXPECT_EQ(reserved.pending_transfers(), 1u);

  ctx.TryCancel();
  v1::DecodeEvent ignored;
  while (reader->Read(&ignored)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  v1::LoadReport after = load();
  for (int i = 0; i < 500 && (after.kv_blocks_used() > 0 || after.pending_transfers() > 0); ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    after = load();
  }
  EXPECT_EQ(after.kv_blocks_used(), 0u);
  EXPECT_EQ(after.pending_transfers(), 0u);
  EXPECT_EQ(after.kv_blocks_free(), after.kv_blocks_total());
}

}  // namespace
}  // namespace pdserve
