// Both workers' gRPC services in process, on a random-weight model, called
// directly (no router): bodies that are not the method's message get
// INVALID_ARGUMENT naming the type and the worker keeps serving; a remote
// prefill driven by hand (Decode -> Reserved -> Prefill -> Tokens) and a
// local one stream well-formed events through the raw methods; a draining
// decode worker hands a stream to another with its KV (Migrating ->
// Reserved on the target -> Handoff), and a handoff that cannot reach its
// target frees the blocks and ends the stream.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <future>
#include <thread>
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
using decode::DrainMigration;
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
      {true, "Handoff", not_protobuf, "pdserve.v1.HandoffRequest"},
      {true, "OfferMigration", not_protobuf, "pdserve.v1.OfferMigrationRequest"},
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

// KV migration by hand, as the router drives it.
class MigrationRpcTest : public WorkerRpcTest {
 protected:
  // A decode worker whose drain moves every stream (one starts only after
  // the drain has begun).
  static std::unique_ptr<DecodeWorker> StartDecode(DrainMigration mode) {
    DecodeWorkerConfig c = Small(DecodeWorkerConfig());
    c.kv_listen = "127.0.0.1:0";
    c.drain_timeout = absl::Seconds(30);
    c.drain_migration = mode;
    auto w = DecodeWorker::Start(c);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? std::move(*w) : nullptr;
  }

  // Opens a remote-prefill stream on `source` that accepts migration,
  // starts draining `source` (on `drain`), then prefills the stream from
  // the prefill worker: its first token commits while the worker drains.
  // Returns the reader positioned after Reserved.
  std::unique_ptr<grpc::ClientReader<v1::DecodeEvent>> StreamIntoADrain(
      DecodeWorker& source, const std::vector<int32_t>& prompt, grpc::ClientContext* ctx,
      std::thread* drain, bool* drained) {
    auto stub = v1::DecodeWorker::NewStub(Channel(source.port()));
    v1::DecodeRequest r = DecodeOf(prompt, /*local=*/false);
    r.set_request_id("moved-1");
    r.set_max_tokens(kMaxTokens);
    r.set_accepts_migration(true);
    ctx->set_deadline(In(absl::Seconds(60)));
    auto reader = stub->Decode(ctx, r);
    v1::DecodeEvent first;
    EXPECT_TRUE(reader->Read(&first));
    EXPECT_TRUE(first.has_reserved());
    *drain = std::thread([&source, drained] { *drained = source.Drain(); });
    // The drain has begun once the worker reports it.
    for (int i = 0; i < 500; ++i) {
      grpc::ClientContext lc;
      lc.set_deadline(In(absl::Seconds(10)));
      v1::LoadReport load;
      if (stub->GetLoad(&lc, v1::GetLoadRequest(), &load).ok() && load.draining()) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    v1::PrefillRequest pr;
    pr.set_request_id("moved-1");
    pr.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
    *pr.mutable_target() = Target(first.reserved());
    grpc::ClientContext pc;
    pc.set_deadline(In(absl::Seconds(60)));
    v1::PrefillResponse answer;
    const grpc::Status ps = v1::PrefillWorker::NewStub(prefill_channel_)->Prefill(&pc, pr, &answer);
    EXPECT_TRUE(ps.ok()) << ps.error_message();
    return reader;
  }

  static v1::KvTarget Target(const v1::Reserved& reserved) {
    v1::KvTarget t;
    t.set_kv_endpoint(reserved.kv_endpoint());
    t.set_transfer_id(reserved.transfer_id());
    t.set_epoch(reserved.epoch());
    *t.mutable_kv_layout() = reserved.kv_layout();
    t.set_skip_prefix_tokens(reserved.cached_prefix_tokens());
    *t.mutable_kv_transports() = reserved.kv_transports();
    t.set_kv_host_id(reserved.kv_host_id());
    return t;
  }

  // Reads the offered stream up to Migrating: the tokens it emitted, and
  // the offer's id.
  static std::vector<int32_t> ReadUntilMigrating(grpc::ClientReader<v1::DecodeEvent>* reader,
                                                 uint64_t* offer_id) {
    std::vector<int32_t> ids;
    v1::DecodeEvent event;
    while (reader->Read(&event)) {
      if (event.has_tokens()) {
        ids.insert(ids.end(), event.tokens().ids().begin(), event.tokens().ids().end());
      }
      if (event.has_migrating()) {
        EXPECT_EQ(event.migrating().generated_tokens(), static_cast<int>(ids.size()));
        *offer_id = event.migrating().offer_id();
        return ids;
      }
      EXPECT_FALSE(event.has_finished()) << "the stream finished instead of being offered";
    }
    ADD_FAILURE() << "the stream ended without Migrating";
    return ids;
  }

  static constexpr int kMaxTokens = 40;
};

TEST_F(MigrationRpcTest, ADrainingWorkerHandsAStreamToAnotherWithItsKv) {
  const std::vector<int32_t> prompt = {5, 17, 42, 99, 7,  250, 31, 64, 12,  8,  3,
                                       77, 19, 200, 150, 33, 21, 90, 45, 61, 11};
  std::unique_ptr<DecodeWorker> source = StartDecode(DrainMigration::kAll);
  std::unique_ptr<DecodeWorker> target = StartDecode(DrainMigration::kAuto);
  ASSERT_NE(source, nullptr);
  ASSERT_NE(target, nullptr);
  auto target_stub = v1::DecodeWorker::NewStub(Channel(target->port()));

  // Undisturbed, on the target (which then caches the prompt's first
  // block: the handoff must skip it).
  v1::DecodeRequest whole = DecodeOf(prompt, /*local=*/true);
  whole.set_max_tokens(kMaxTokens);
  grpc::ClientContext whole_ctx;
  whole_ctx.set_deadline(In(absl::Seconds(60)));
  const DecodeRun want = ReadTokens(target_stub->Decode(&whole_ctx, whole).get());
  ASSERT_TRUE(want.status.ok()) << want.status.error_message();
  ASSERT_EQ(want.ids.size(), static_cast<size_t>(kMaxTokens));

  grpc::ClientContext source_ctx;
  std::thread drain;
  bool drained = false;
  auto source_reader = StreamIntoADrain(*source, prompt, &source_ctx, &drain, &drained);
  uint64_t offer_id = 0;
  const std::vector<int32_t> emitted = ReadUntilMigrating(source_reader.get(), &offer_id);
  ASSERT_GE(emitted.size(), 1u);
  const int n = static_cast<int>(emitted.size());

  // The target reserves for prompt + all but the last emitted token.
  v1::DecodeRequest cont = DecodeOf(prompt, /*local=*/false);
  cont.set_request_id("moved-1");
  cont.mutable_prompt_tokens()->Add(emitted.begin(), emitted.end() - 1);
  cont.set_first_index(n - 1);
  cont.set_max_tokens(kMaxTokens - (n - 1));
  cont.set_migrated(true);
  grpc::ClientContext target_ctx;
  target_ctx.set_deadline(In(absl::Seconds(60)));
  auto target_reader = target_stub->Decode(&target_ctx, cont);
  v1::DecodeEvent reserved;
  ASSERT_TRUE(target_reader->Read(&reserved));
  ASSERT_TRUE(reserved.has_reserved());
  EXPECT_GT(reserved.reserved().cached_prefix_tokens(), 0u);

  v1::HandoffRequest handoff;
  handoff.set_request_id("moved-1");
  *handoff.mutable_target() = Target(reserved.reserved());
  // Another offer's id is refused, and changes nothing.
  handoff.set_offer_id(offer_id + 1000);
  {
    grpc::ClientContext wc;
    wc.set_deadline(In(absl::Seconds(10)));
    v1::HandoffResponse r;
    EXPECT_EQ(v1::DecodeWorker::NewStub(Channel(source->port()))->Handoff(&wc, handoff, &r)
                  .error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  handoff.set_offer_id(offer_id);
  grpc::ClientContext hc;
  hc.set_deadline(In(absl::Seconds(60)));
  v1::HandoffResponse moved;
  const grpc::Status hs =
      v1::DecodeWorker::NewStub(Channel(source->port()))->Handoff(&hc, handoff, &moved);
  ASSERT_TRUE(hs.ok()) << hs.error_message();
  EXPECT_GT(moved.kv_transfer_bytes(), 0u);

  // The target re-emits the last token the source emitted, then goes on.
  std::vector<int32_t> got(emitted.begin(), emitted.end() - 1);
  v1::DecodeEvent event;
  bool first = true;
  while (target_reader->Read(&event)) {
    if (!event.has_tokens()) continue;
    if (first) EXPECT_EQ(event.tokens().first_index(), n - 1);
    first = false;
    got.insert(got.end(), event.tokens().ids().begin(), event.tokens().ids().end());
  }
  ASSERT_TRUE(target_reader->Finish().ok());
  EXPECT_EQ(got, want.ids);

  // The source's stream ends once the move is done, and its drain finds
  // every block back.
  v1::DecodeEvent rest;
  while (source_reader->Read(&rest)) {
  }
  EXPECT_EQ(source_reader->Finish().error_code(), grpc::StatusCode::ABORTED);
  drain.join();
  EXPECT_TRUE(drained);
}

TEST_F(MigrationRpcTest, AHandoffThatCannotReachItsTargetFreesTheBlocks) {
  const std::vector<int32_t> prompt = {9, 8, 7, 6, 5, 4, 3, 2, 1, 10, 11, 12, 13, 14, 15, 16, 17};
  std::unique_ptr<DecodeWorker> source = StartDecode(DrainMigration::kAll);
  ASSERT_NE(source, nullptr);
  auto source_stub = v1::DecodeWorker::NewStub(Channel(source->port()));
  v1::HandoffRequest handoff;
  handoff.set_request_id("moved-1");
  {
    grpc::ClientContext hc;
    hc.set_deadline(In(absl::Seconds(10)));
    v1::HandoffResponse r;
    EXPECT_EQ(source_stub->Handoff(&hc, handoff, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  }

  grpc::ClientContext source_ctx;
  std::thread drain;
  bool drained = false;
  auto source_reader = StreamIntoADrain(*source, prompt, &source_ctx, &drain, &drained);
  uint64_t offer_id = 0;
  ReadUntilMigrating(source_reader.get(), &offer_id);
  handoff.set_offer_id(offer_id);

  // A target that is gone: nothing listens on its KV endpoint.
  v1::KvTarget* t = handoff.mutable_target();
  t->set_kv_endpoint("127.0.0.1:1");
  t->set_transfer_id(1);
  t->set_epoch(1);
  {
    grpc::ClientContext lc;
    lc.set_deadline(In(absl::Seconds(10)));
    v1::WorkerInfo info;
    ASSERT_TRUE(source_stub->GetInfo(&lc, v1::GetInfoRequest(), &info).ok());
    *t->mutable_kv_layout() = info.kv_layout();
  }
  grpc::ClientContext hc;
  hc.set_deadline(In(absl::Seconds(60)));
  v1::HandoffResponse r;
  const grpc::Status hs = source_stub->Handoff(&hc, handoff, &r);
  EXPECT_EQ(hs.error_code(), grpc::StatusCode::UNAVAILABLE) << hs.error_message();

  v1::DecodeEvent rest;
  while (source_reader->Read(&rest)) {
  }
  const grpc::Status end = source_reader->Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(end.error_message().find("migration failed"), std::string::npos) << end.error_message();
  drain.join();
  EXPECT_TRUE(drained) << "blocks of the failed move were not given back";
}

// OfferMigration (the router rebalancing) refuses what cannot move now: an
// unknown request, a stream that has no token yet, one that does not
// accept migration.
TEST_F(WorkerRpcTest, OfferMigrationRefusesWhatCannotMove) {
  auto decode = v1::DecodeWorker::NewStub(decode_channel_);
  auto offer = [&decode](const std::string& id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(10)));
    v1::OfferMigrationRequest r;
    r.set_request_id(id);
    v1::OfferMigrationResponse answer;
    return decode->OfferMigration(&ctx, r, &answer);
  };
  EXPECT_EQ(offer("nobody").error_code(), grpc::StatusCode::NOT_FOUND);
  for (bool accepts : {true, false}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(60)));
    v1::DecodeRequest r = DecodeOf({5, 17, 42, 99, 7, 250, 31}, /*local=*/false);
    // Ids of their own: the first stream may still be leaving when the
    // second arrives, and an id naming two streams is refused as such.
    r.set_request_id(accepts ? "offer-accepts" : "offer-refuses");
    r.set_accepts_migration(accepts);
    auto reader = decode->Decode(&ctx, r);
    v1::DecodeEvent first;
    ASSERT_TRUE(reader->Read(&first));
    ASSERT_TRUE(first.has_reserved());  // waits for its KV: no token yet
    const grpc::Status s = offer(r.request_id());
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(s.error_message().find(accepts ? "cannot move now" : "does not accept migration"),
              std::string::npos)
        << s.error_message();
    ctx.TryCancel();
    while (reader->Read(&first)) {
    }
    reader->Finish();
  }
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
  // The load is published after the engine-thread closure that sent
  // Reserved returns: poll briefly for it (a slow build, e.g. ASan, can
  // answer GetLoad in between).
  v1::LoadReport reserved = load();
  for (int i = 0; i < 250 && reserved.kv_blocks_used() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    reserved = load();
  }
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
