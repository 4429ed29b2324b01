#include "prefill_worker/kv_exporter.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace pdserve::prefill {

KvExporter::KvExporter(KvSender* sender, KvCache* cache, int num_commit_threads,
                       absl::Duration progress_interval)
    : sender_(sender),
      cache_(cache),
      num_layers_(cache->layout().n_layers),
      progress_interval_(progress_interval),
      commits_(std::make_unique<JobLane>(num_commit_threads)),
      aborts_(std::make_unique<JobLane>(1)) {}

KvExporter::~KvExporter() {
  aborts_.reset();
  commits_.reset();
}

void KvExporter::Register(int64_t seq_id, const KvTransferTarget& target, int32_t prompt_len,
                          int32_t skip_blocks, int32_t cached_blocks,
                          const std::vector<int32_t>& blocks) {
  Transfer& t = transfers_[seq_id];
  t.target = target;
  t.prompt_len = prompt_len;
  t.next_block = skip_blocks;
  t.last_signal = absl::Now();
  if (cached_blocks <= skip_blocks) return;
  for (int layer = 0; layer < num_layers_ && t.error.ok(); ++layer) {
    SendBlocks(t, layer, blocks, cached_blocks);
  }
  t.next_block = cached_blocks;
}

void KvExporter::OnLayer(int layer, const std::vector<Engine::LayerChunk>& chunks) {
  const int32_t bs = cache_->layout().block_size;
  for (const Engine::LayerChunk& c : chunks) {
    auto it = transfers_.find(c.seq_id);
    if (it == transfers_.end() || !it->second.error.ok()) continue;
    Transfer& t = it->second;
    // Whole blocks only, except the prompt's last (partial) block at the end.
    const int32_t end_block =
        c.completes_prompt ? BlocksForTokens(t.prompt_len, bs) : (c.start_pos + c.n_tokens) / bs;
    SendBlocks(t, layer, *c.blocks, end_block);
    if (layer == num_layers_ - 1) t.next_block = std::max(t.next_block, end_block);
  }
  if (layer == num_layers_ - 1) SendKeepAlives();
}

void KvExporter::SendKeepAlives() {
  const absl::Time now = absl::Now();
  for (auto& [seq_id, t] : transfers_) {
    const bool due = !t.sent_this_step && t.error.ok() && now - t.last_signal >= progress_interval_;
    t.sent_this_step = false;
    if (!due) continue;
    t.last_signal = now;
    if (absl::Status s = sender_->SendProgress(t.target); !s.ok()) {
      LOG(WARNING) << "kv progress of transfer " << t.target.transfer_id << " failed: " << s;
      t.error = s;
    }
  }
}

void KvExporter::SendBlocks(Transfer& t, int layer, const std::vector<int32_t>& table,
                            int32_t end_block) {
  // A window layer's blocks before the prompt's last window are never read
  // on the decode side: they stay here (the receiver does not expect them).
  const int32_t n_blocks = BlocksForTokens(t.prompt_len, cache_->layout().block_size);
  const int32_t first = std::max(t.next_block, cache_->layout().FirstSentBlock(layer, n_blocks));
  if (end_block <= first) return;
  std::vector<int32_t> logical, physical;
  for (int32_t b = first; b < end_block; ++b) {
    logical.push_back(b);
    physical.push_back(table[b]);
  }
  absl::Status s = sender_->SendLayer(t.target, layer, logical, *cache_, physical);
  if (!s.ok()) {
    LOG(WARNING) << "kv send of transfer " << t.target.transfer_id << " failed: " << s;
    t.error = s;
    return;
  }
  const uint64_t bytes =
      logical.size() * static_cast<uint64_t>(cache_->layout().bytes_per_layer_block());
  t.sent_this_step = true;
  t.last_signal = absl::Now();
  t.bytes += bytes;
  bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
}

void KvExporter::Finish(int64_t seq_id, int32_t first_token,
                        std::optional<TokenLogprobs> first_logprobs, std::vector<int32_t> blocks,
                        DoneFn done) {
  auto it = transfers_.find(seq_id);
  if (it == transfers_.end()) {
    FreeLater(std::move(blocks));
    done(absl::InternalError("no transfer registered for the sequence"));
    return;
  }
  Transfer t = std::move(it->second);
  transfers_.erase(it);
  {
    absl::MutexLock lock(&committing_mu_);
    committing_[seq_id] = t.target;
  }
  const absl::Time queued = absl::Now();
  commits_->Post([this, seq_id, t = std::move(t), first_token,
                  first_logprobs = std::move(first_logprobs), blocks = std::move(blocks),
                  done = std::move(done), queued]() mutable {
    absl::Status s = t.error;
    if (s.ok()) {
      KvCommit commit;
      commit.num_layers = num_layers_;
      commit.first_token = first_token;
      commit.first_token_logprobs = std::move(first_logprobs);
      s = sender_->Commit(t.target, commit);
    }
    if (!s.ok()) sender_->Abort(t.target, std::string(s.message()));
    {
      absl::MutexLock lock(&committing_mu_);
      committing_.erase(seq_id);
    }
    // Only now may the blocks be reused: the sender no longer reads them.
    FreeLater(std::move(blocks));
    if (!s.ok()) {
      done(s);
      return;
    }
    done(KvExportResult{t.bytes, absl::Now() - queued});
  });
}

void KvExporter::Cancel(Engine& engine, int64_t seq_id, const std::string& reason) {
  std::vector<int32_t> blocks = engine.CancelAndTakeBlocks(seq_id);
  auto it = transfers_.find(seq_id);
  if (it == transfers_.end()) {
    FreeLater(std::move(blocks));  // nothing was sent from them
    AbortCommit(seq_id, reason);
    return;
  }
  KvTransferTarget target = it->second.target;
  transfers_.erase(it);
  aborts_->Post([this, target = std::move(target), reason, blocks = std::move(blocks)]() mutable {
    sender_->Abort(target, reason);
    FreeLater(std::move(blocks));
  });
}

void KvExporter::AbortCommit(int64_t seq_id, const std::string& reason) {
  std::optional<KvTransferTarget> target;
  {
    absl::MutexLock lock(&committing_mu_);
    if (auto it = committing_.find(seq_id); it != committing_.end()) target = it->second;
  }
  if (!target.has_value()) return;
  // Fails the transfer, which ends the commit's wait for its ack; the commit
  // thread then aborts again (a no-op) and frees the blocks.
  aborts_->Post([this, target = *target, reason] { sender_->Abort(target, reason); });
}

void KvExporter::FreeLater(std::vector<int32_t> blocks) {
  if (blocks.empty()) return;
  loop_->Post([blocks = std::move(blocks)](Engine& e) { e.FreeBlocks(blocks); });
}

}  // namespace pdserve::prefill
