// KvExporter: streams each prefill sequence's KV to its decode worker, layer
// by layer as the engine finishes them, then commits the transfer.
//
// The engine calls OnLayer() from its layer hook (engine thread): every
// block of the step's chunk that is now complete (or the last, partial one
// when the chunk completes the prompt) is queued on the KvSender for that
// layer, each (layer, block) exactly once. When the first token is sampled
// the caller hands over the held blocks with Finish(); the commit (which
// waits for the decode worker's ack) runs on the exporter's own threads so
// the engine never blocks on the network, and `done` receives the outcome.
// Blocks go back to the engine (FreeBlocks on the engine thread) only after
// the commit or abort returned, so the sender never reads a reused block.
// Aborts of cancelled prefills run on a thread of their own, never behind
// commits waiting for their acks (a hung decode worker's commits can hold
// every commit thread until their deadlines).
//
// Keep-alive: the decode worker waits for each transfer's next frame for
// a bounded time, so after every step a transfer that sent no layer in it
// (its sequence queued behind others, a prefix the decode worker holds
// being recomputed, a chunk shorter than a block) sends a PROGRESS frame,
// at most once per `progress_interval`.
//
// Delta transfer: blocks below the target's skip (the decode worker holds
// them) are never sent. Blocks the engine took from this worker's own
// prefix cache are complete in every layer at admission, so Register sends
// the ones the decode worker lacks right away.
//
// Thread-safety: Register/OnLayer/Finish/Cancel on the engine thread only.
#ifndef PDSERVE_PREFILL_WORKER_KV_EXPORTER_H_
#define PDSERVE_PREFILL_WORKER_KV_EXPORTER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/job_lane.h"
#include "common/engine/engine.h"
#include "common/engine/engine_loop.h"
#include "common/kv/kv_transport.h"
#include "common/request/token_logprobs.h"

namespace pdserve::prefill {

struct KvExportResult {
  uint64_t bytes = 0;
  absl::Duration transfer = absl::ZeroDuration();  // last layer queued -> ack
};

class KvExporter {
 public:
  using DoneFn = std::function<void(absl::StatusOr<KvExportResult>)>;

  KvExporter(KvSender* sender, KvCache* cache, int num_commit_threads,
             absl::Duration progress_interval = absl::Milliseconds(250));
  // The loop whose engine calls this exporter (it is built after the
  // exporter, whose OnLayer the engine needs). Set once, before any call.
  void AttachLoop(EngineLoop* loop) { loop_ = loop; }
  ~KvExporter();

  // `blocks` is the sequence's block table, whose first `cached_blocks`
  // came from the prefix cache; the decode worker holds the first
  // `skip_blocks` already.
  void Register(int64_t seq_id, const KvTransferTarget& target, int32_t prompt_len,
                int32_t skip_blocks, int32_t cached_blocks, const std::vector<int32_t>& blocks);
  // The engine's layer hook.
  void OnLayer(int layer, const std::vector<Engine::LayerChunk>& chunks);
  // First token sampled: commit in the background, then free `blocks`. The
  // commit carries the token and, when the request asked for them, its
  // logprobs (the decode worker emits the token).
  void Finish(int64_t seq_id, int32_t first_token, std::optional<TokenLogprobs> first_logprobs,
              std::vector<int32_t> blocks, DoneFn done);
  // The request died (cancelled, or its step failed): ends the sequence in
  // `engine` if it still runs, aborts the transfer in the background, then
  // frees the sequence's blocks. An abort may wait for the transport to let
  // go of them (an NCCL channel's sends to drain), which the engine thread
  // must not. After Finish, it aborts the commit that waits for its ack (a
  // hung decode worker would hold a commit thread until the deadline),
  // whose thread then frees the blocks.
  void Cancel(Engine& engine, int64_t seq_id, const std::string& reason);
  // KV payload bytes queued so far, all transfers (any thread).
  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }

 private:
  struct Transfer {
    KvTransferTarget target;
    int32_t prompt_len = 0;
    int32_t next_block = 0;  // first logical block not yet sent
    uint64_t bytes = 0;
    absl::Status error;
    bool sent_this_step = false;  // a layer frame since the last step ended
    absl::Time last_signal;       // the last frame of any kind
  };
  // Queues layer `layer` of logical blocks [t.next_block, end_block).
  void SendBlocks(Transfer& t, int layer, const std::vector<int32_t>& table, int32_t end_block);
  // After a step's last layer: PROGRESS for transfers that sent no layer.
  void SendKeepAlives();
  // Cancel after Finish: aborts the transfer if its commit still runs.
  void AbortCommit(int64_t seq_id, const std::string& reason);
  // Hands blocks back to the engine, once the sender reads them no more.
  void FreeLater(std::vector<int32_t> blocks);

  KvSender* const sender_;
  KvCache* const cache_;
  EngineLoop* loop_ = nullptr;
  const int num_layers_;
  const absl::Duration progress_interval_;
  std::map<int64_t, Transfer> transfers_;  // engine thread only
  // Finished transfers whose commit has not returned yet, for Cancel.
  absl::Mutex committing_mu_;
  std::map<int64_t, KvTransferTarget> committing_ ABSL_GUARDED_BY(committing_mu_);
  std::atomic<uint64_t> bytes_sent_{0};

  std::unique_ptr<JobLane> commits_;  // Finish: the commit, and the abort after a failed one
  std::unique_ptr<JobLane> aborts_;   // Cancel
};

}  // namespace pdserve::prefill

#endif  // PDSERVE_PREFILL_WORKER_KV_EXPORTER_H_
