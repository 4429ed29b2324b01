// KvExporter on a real engine loop with a fake sender whose Abort can be
// held (as an NCCL abort waits for its channel to drain): a cancelled
// prefill never holds up the engine thread, and its blocks go back to the
// pool only after the abort returned, whether the sequence was still
// prefilling, had already finished and held its blocks, or was ended by a
// failed step.
#include "prefill_worker/kv_exporter.h"

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/cpu/cpu_model_runner.h"
#include "common/engine/engine_loop.h"
#include "common/engine/kv_cache.h"
#include "common/text/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/random_model_util.h"

namespace pdserve::prefill {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kBlocks = 32;
const absl::Duration kWait = absl::Seconds(60);  // a hang detector, not a speed check

// Records what the exporter asks for. Abort blocks while `hold_abort` is
// set and not yet notified (the fault knob).
class FakeSender : public KvSender {
 public:
  absl::Status SendLayer(const KvTransferTarget&, int, absl::Span<const int32_t>, KvCache&,
                         absl::Span<const int32_t>) override {
    absl::MutexLock lock(&mu_);
    ++layers_;
    return absl::OkStatus();
  }
  absl::Status Commit(const KvTransferTarget&, const KvCommit&) override {
    absl::MutexLock lock(&mu_);
    ++commits_;
    // A hung decode worker: no ack until the transfer is aborted.
    auto aborted = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !aborted_.empty(); };
    if (hold_commits_ && !mu_.AwaitWithTimeout(absl::Condition(&aborted), kWait)) {
      return absl::DeadlineExceededError("test: no ack and no abort");
    }
    return hold_commits_ ? absl::AbortedError("aborted while waiting for the ack")
                         : absl::OkStatus();
  }
  absl::Status SendProgress(const KvTransferTarget& target) override {
    absl::MutexLock lock(&mu_);
    ++progress_[target.transfer_id];
    return absl::OkStatus();
  }
  void Abort(const KvTransferTarget& target, std::string) override {
    {
      absl::MutexLock lock(&mu_);
      aborted_.push_back(target.transfer_id);
    }
    if (!abort_entered_.HasBeenNotified()) abort_entered_.Notify();
    if (hold_abort_ != nullptr) hold_abort_->WaitForNotification();
  }

  void HoldAborts(absl::Notification* release) { hold_abort_ = release; }
  void HoldCommits() {
    absl::MutexLock lock(&mu_);
    hold_commits_ = true;
  }
  bool AwaitAbortEntered() { return abort_entered_.WaitForNotificationWithTimeout(kWait); }
  int layers() {
    absl::MutexLock lock(&mu_);
    return layers_;
  }
  int commits() {
    absl::MutexLock lock(&mu_);
    return commits_;
  }
  int progress(uint64_t transfer_id) {
    absl::MutexLock lock(&mu_);
    return progress_[transfer_id];
  }
  std::vector<uint64_t> aborted() {
    absl::MutexLock lock(&mu_);
    return aborted_;
  }

 private:
  absl::Mutex mu_;
  int layers_ ABSL_GUARDED_BY(mu_) = 0;
  int commits_ ABSL_GUARDED_BY(mu_) = 0;
  bool hold_commits_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, int> progress_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> aborted_ ABSL_GUARDED_BY(mu_);
  absl::Notification abort_entered_;
  absl::Notification* hold_abort_ = nullptr;
};

// The CPU runner, with a fault knob: fail the next forward steps.
class FaultyRunner : public ModelRunner {
 public:
  explicit FaultyRunner(ModelRunner* inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_->config(); }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override {
    if (fail_.load()) return absl::InternalError("injected step failure");
    return inner_->Forward(batch, cache, logits);
  }
  void FailSteps(bool fail) { fail_.store(fail); }

 private:
  ModelRunner* inner_;
  std::atomic<bool> fail_{false};
};

class KvExporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::LoadTestModel(test::SmallEngineSpec(11, 256));
    ASSERT_NE(model_, nullptr);
    auto tok = Tokenizer::FromGguf(*model_->gguf);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
    runner_ = std::make_unique<CpuModelRunner>(model_->config, &model_->weights, 1);
    faulty_ = std::make_unique<FaultyRunner>(runner_.get());
    auto cache = KvCache::Create(KvLayout::ForModel(model_->config, kBlockSize), kBlocks);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = std::move(*cache);
    sender_.HoldAborts(&release_abort_);
    // Keep-alives after every step that sends no layer, for exact counts.
    exporter_ = std::make_unique<KvExporter>(&sender_, cache_.get(), /*num_commit_threads=*/1,
                                             /*progress_interval=*/absl::ZeroDuration());
    Engine::Options o;
    o.max_batch_tokens = 16;  // a 64-token prompt takes four steps
    o.prefix_cache = false;
    o.on_layer_done = [this](int layer, const std::vector<Engine::LayerChunk>& chunks) {
      exporter_->OnLayer(layer, chunks);
    };
    loop_ = std::make_unique<EngineLoop>(
        std::make_unique<Engine>(tokenizer_.get(), faulty_.get(), cache_.get(), o));
    exporter_->AttachLoop(loop_.get());
  }

  void TearDown() override {
    // Never leave a commit thread blocked.
    if (!release_abort_.HasBeenNotified()) release_abort_.Notify();
    if (loop_ != nullptr) loop_->Stop();
    exporter_.reset();
    loop_.reset();
  }

  SequenceOptions Prompt(int n) {
    SequenceOptions o;
    o.prompt = test::RandomTokens(n, model_->config.n_vocab, 3);
    o.max_tokens = 1;
    o.ignore_eos = true;
    o.hold_kv_on_finish = true;
    return o;
  }

  // Adds a prefill sequence and registers its transfer (engine thread);
  // the decode worker holds the first `skip_blocks` blocks.
  int64_t AddAndRegister(Engine& e, const SequenceOptions& o, uint64_t transfer_id,
                         int32_t skip_blocks = 0) {
    absl::StatusOr<int64_t> id = e.Add(o, [](const TokenEvent&) {});
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return 0;
    const KvTransferTarget target{"127.0.0.1:1", transfer_id, 1, absl::Now() + kWait};
    exporter_->Register(*id, target, static_cast<int32_t>(o.prompt.size()), skip_blocks, 0,
                        e.BlocksOf(*id));
    return *id;
  }

  // Runs `fn` on the engine thread and waits for it: false if the engine
  // thread is held up (by an abort, say) for kWait.
  bool RunOnEngine(std::function<void(Engine&)> fn) {
    auto ran = std::make_shared<absl::Notification>();
    EXPECT_TRUE(loop_->Post([fn = std::move(fn), ran](Engine& e) {
      fn(e);
      ran->Notify();
    }));
    return ran->WaitForNotificationWithTimeout(kWait);
  }

  int32_t FreeBlocks() {
    int32_t n = -1;
    EXPECT_TRUE(RunOnEngine([&](Engine& e) { n = e.cache().allocator().num_free(); }));
    return n;
  }

  std::unique_ptr<test::TestModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CpuModelRunner> runner_;
  std::unique_ptr<FaultyRunner> faulty_;
  std::unique_ptr<KvCache> cache_;
  FakeSender sender_;
  absl::Notification release_abort_;
  std::unique_ptr<KvExporter> exporter_;
  std::unique_ptr<EngineLoop> loop_;
};

// A prefix the decode worker already holds is recomputed but not sent:
// each such step tells the decode worker it is at work (PROGRESS), so its
// wait for the transfer does not run out; steps that send layers need not.
TEST_F(KvExporterTest, StepsThatSendNoLayerSendProgress) {
  const SequenceOptions o = Prompt(64);  // four 16-token steps
  ASSERT_TRUE(RunOnEngine([&](Engine& e) {
    AddAndRegister(e, o, 5, /*skip_blocks=*/2);
    ASSERT_TRUE(e.Step().ok());
    ASSERT_TRUE(e.Step().ok());  // blocks 0 and 1: held by the decode worker
    EXPECT_EQ(sender_.layers(), 0);
    EXPECT_EQ(sender_.progress(5), 2);
    ASSERT_TRUE(e.Step().ok());
    ASSERT_TRUE(e.Step().ok());  // blocks 2 and 3, every layer
    EXPECT_EQ(sender_.layers(), 2 * model_->config.n_layers);
    EXPECT_EQ(sender_.progress(5), 2);
  }));
}

// A prompt queued behind another (no budget left in the steps) says it is
// alive after each step until its own layers flow.
TEST_F(KvExporterTest, QueuedTransfersSendProgressUntilTheirTurn) {
  ASSERT_TRUE(RunOnEngine([&](Engine& e) {
    AddAndRegister(e, Prompt(64), 5);  // four 16-token steps, a block each
    AddAndRegister(e, Prompt(32), 6);  // waits for them
    for (int step = 0; step < 4; ++step) ASSERT_TRUE(e.Step().ok());
    EXPECT_EQ(sender_.progress(5), 0);
    EXPECT_EQ(sender_.progress(6), 4);
    EXPECT_EQ(sender_.layers(), 4 * model_->config.n_layers);
    while (e.HasWork()) ASSERT_TRUE(e.Step().ok());
    EXPECT_EQ(sender_.progress(6), 4);
    EXPECT_EQ(sender_.layers(), 6 * model_->config.n_layers);
  }));
}

// The decode worker never acks the commit: a cancel (the router gave up)
// aborts it, the commit's wait ends at once and the blocks come back.
TEST_F(KvExporterTest, CancelDuringTheCommitAbortsIt) {
  release_abort_.Notify();  // aborts return at once here
  sender_.HoldCommits();
  const SequenceOptions o = Prompt(40);
  int64_t id = 0;
  absl::Notification finished;
  absl::Status result;
  ASSERT_TRUE(RunOnEngine([&](Engine& e) {
    id = AddAndRegister(e, o, 11);
    while (e.HasWork()) ASSERT_TRUE(e.Step().ok());
    exporter_->Finish(id, 0, std::nullopt, e.TakeHeldBlocks(id),
                      [&](absl::StatusOr<KvExportResult> r) {
                        result = r.status();
                        finished.Notify();
                      });
  }));
  EXPECT_FALSE(finished.WaitForNotificationWithTimeout(absl::Milliseconds(100)));  // no ack
  ASSERT_TRUE(RunOnEngine([&](Engine& e) { exporter_->Cancel(e, id, "router gave up"); }));
  ASSERT_TRUE(finished.WaitForNotificationWithTimeout(kWait)) << "the commit still waits";
  EXPECT_EQ(result.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(loop_->WaitIdle(absl::Now() + kWait));
  EXPECT_EQ(FreeBlocks(), kBlocks);
  EXPECT_EQ(sender_.aborted().front(), 11u);
}

TEST_F(KvExporterTest, CancelMidPrefillAbortsOffTheEngineThreadAndFreesBlocksAfter) {
  const SequenceOptions o = Prompt(64);
  ASSERT_TRUE(RunOnEngine([&](Engine& e) {
    const int64_t id = AddAndRegister(e, o, 7);
    ASSERT_TRUE(e.Step().ok());  // the first chunk: its layers are sent
    exporter_->Cancel(e, id, "cancelled by the test");
  })) << "the engine thread waited for the abort";
  ASSERT_TRUE(sender_.AwaitAbortEntered());
  EXPECT_GT(sender_.layers(), 0);
  // The abort is held: the engine thread still runs, the blocks are not back.
  EXPECT_LT(FreeBlocks(), kBlocks);
  release_abort_.Notify();
  EXPECT_TRUE(loop_->WaitIdle(absl::Now() + kWait));
  EXPECT_EQ(FreeBlocks(), kBlocks);
  EXPECT_EQ(sender_.aborted(), std::vector<uint64_t>{7});
  EXPECT_EQ(sender_.commits(), 0);
}

// The first token was sampled (the blocks are held) but Finish has not run
// yet: the cancel takes the held blocks, and the late Finish frees nothing
// and commits nothing.
TEST_F(KvExporterTest, CancelOfAFinishedPrefillTakesItsHeldBlocks) {
  const SequenceOptions o = Prompt(40);
  int64_t id = 0;
  ASSERT_TRUE(RunOnEngine([&](Engine& e) {
    id = AddAndRegister(e, o, 9);
    while (e.HasWork()) ASSERT_TRUE(e.Step().ok());
    exporter_->Cancel(e, id, "cancelled by the test");
  }));
  ASSERT_TRUE(sender_.AwaitAbortEntered());
  absl::Notification finished;
  absl::Status late;
  ASSERT_TRUE(RunOnEngine([&](Engine& e) {
    exporter_->Finish(id, 0, std::nullopt, e.TakeHeldBlocks(id),
                      [&](absl::StatusOr<KvExportResult> r) {
                        late = r.status();
                        finished.Notify();
                      });
  }));
  EXPECT_TRUE(finished.WaitForNotificationWithTimeout(kWait));
  EXPECT_FALSE(late.ok());
  EXPECT_LT(FreeBlocks(), kBlocks);  // still held by the abort
  release_abort_.Notify();
  EXPECT_TRUE(loop_->WaitIdle(absl::Now() + kWait));
  EXPECT_EQ(FreeBlocks(), kBlocks);
  EXPECT_EQ(sender_.aborted(), std::vector<uint64_t>{9});
  EXPECT_EQ(sender_.commits(), 0);
}

// A step that fails after some layers went out ends the sequence; its
// blocks stay held until the exporter's abort returned.
TEST_F(KvExporterTest, AFailedStepsBlocksWaitForTheAbort) {
  const SequenceOptions o = Prompt(64);
  int64_t id = 0;
  ASSERT_TRUE(RunOnEngine([&](Engine& e) {
    id = AddAndRegister(e, o, 5);
    ASSERT_TRUE(e.Step().ok());
    faulty_->FailSteps(true);
    EXPECT_FALSE(e.Step().ok());
    EXPECT_EQ(e.num_sequences(), 0);  // ended by the failure
  }));
  faulty_->FailSteps(false);
  EXPECT_LT(FreeBlocks(), kBlocks);  // held: the layers sent may still be read
  ASSERT_TRUE(RunOnEngine([&](Engine& e) { exporter_->Cancel(e, id, "step failed"); }));
  ASSERT_TRUE(sender_.AwaitAbortEntered());
  EXPECT_LT(FreeBlocks(), kBlocks);
  release_abort_.Notify();
  EXPECT_TRUE(loop_->WaitIdle(absl::Now() + kWait));
  EXPECT_EQ(FreeBlocks(), kBlocks);
  EXPECT_EQ(sender_.aborted(), std::vector<uint64_t>{5});
}

// A cancel of a sequence the exporter never saw still frees its blocks.
TEST_F(KvExporterTest, CancelOfAnUnregisteredSequenceFreesItsBlocks) {
  const SequenceOptions o = Prompt(40);
  ASSERT_TRUE(RunOnEngine([&](Engine& e) {
    absl::StatusOr<int64_t> id = e.Add(o, [](const TokenEvent&) {});
    ASSERT_TRUE(id.ok()) << id.status();
    exporter_->Cancel(e, *id, "cancelled by the test");
  }));
  EXPECT_TRUE(loop_->WaitIdle(absl::Now() + kWait));
  EXPECT_EQ(FreeBlocks(), kBlocks);
  EXPECT_TRUE(sender_.aborted().empty());
}

}  // namespace
}  // namespace pdserve::prefill
