#include "common/kv/kv_nccl_peers.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pdserve {

KvNcclPeers::KvNcclPeers(KvCache* cache, Post post, absl::Duration join_timeout,
                         absl::Duration frame_timeout)
    : cache_(cache),
      post_(std::move(post)),
      join_timeout_(join_timeout),
      frame_timeout_(frame_timeout) {}

KvNcclPeers::~KvNcclPeers() { Shutdown(); }

void KvNcclPeers::Shutdown() {
  shut_down_ = true;
  for (auto& [conn, peer] : peers_) {
    *peer.alive = false;
    peer.thread->Interrupt();
  }
  peers_.clear();  // waits for each thread
  retired_.clear();
}

absl::Status KvNcclPeers::Submit(Peer& peer, std::function<absl::Status(KvChannelThread&)> work,
                                 Done done) {
  KvChannelThread* thread = peer.thread.get();
  const bool queued =
      peer.thread->Submit([thread, work = std::move(work), done = std::move(done),
                           alive = peer.alive, post = post_](bool cancelled) mutable {
        if (cancelled) return;  // stopped or forgotten: nobody waits for it
        const absl::Status st = work(*thread);
        // `done` (and the connection it holds) moves to the I/O thread, where
        // it is also destroyed.
        post([alive = std::move(alive), done = std::move(done), st] {
          if (*alive) done(st);
        });
      });
  if (!queued) return absl::UnavailableError("kv receiver: the NCCL channel is stopping");
  return absl::OkStatus();
}

absl::Status KvNcclPeers::Hello(const void* conn, const v1::KvFrameHeader& header, Done done) {
  Reap();
  if (!cache_->on_device() || !cache_->device_memory()->SupportsPeerChannels()) {
    return absl::FailedPreconditionError(
        "kv hello: this decode worker cannot receive over NCCL (its KV cache is not on a GPU, or "
        "it was built without NCCL)");
  }
  if (shut_down_) return absl::UnavailableError("kv hello: the receiver is shutting down");
  if (peers_.contains(conn)) {
    return absl::FailedPreconditionError("kv hello: a second NCCL_HELLO on one connection");
  }
  Peer& peer = peers_[conn];
  const KvDeviceMemory* memory = cache_->device_memory();
  const absl::Time deadline = absl::Now() + join_timeout_;
  return Submit(
      peer,
      [memory, id = header.nccl_id(), deadline](KvChannelThread& thread) -> absl::Status {
        absl::StatusOr<std::unique_ptr<KvPeerChannel>> channel =
            memory->JoinPeerChannel(id, /*rank=*/1, deadline, thread.interrupted_flag());
        if (!channel.ok()) {
          return absl::Status(
              channel.status().code(),
              absl::StrCat("kv hello: joining the NCCL channel: ", channel.status().message()));
        }
        return thread.Adopt(std::move(*channel));
      },
      std::move(done));
}

absl::Status KvNcclPeers::Receive(const void* conn, const v1::KvFrameHeader& header,
                                  std::vector<uint8_t*> dst, Done done) {
  auto it = peers_.find(conn);
  if (it == peers_.end() || shut_down_) {
    return absl::FailedPreconditionError("kv frame: an nccl layer before any NCCL_HELLO");
  }
  if (dst.size() != static_cast<size_t>(header.block_indices_size())) {
    return absl::InternalError("kv frame: destination count differs from the frame's blocks");
  }
  const size_t bpb = static_cast<size_t>(cache_->layout().bytes_per_layer_block());
  const absl::Duration timeout = frame_timeout_;
  return Submit(
      it->second,
      [dst = std::move(dst), bpb, timeout](KvChannelThread& thread) -> absl::Status {
        KvPeerChannel* channel = thread.channel();
        if (channel == nullptr) {
          return absl::FailedPreconditionError("kv frame: the NCCL channel was never joined");
        }
        if (absl::Status st = channel->RecvBlocks(dst, bpb); !st.ok()) return st;
        if (absl::Status st = channel->Wait(absl::Now() + timeout); !st.ok()) {
          return absl::DataLossError(
              absl::StrCat("kv frame: the NCCL transfer did not complete: ", st.message()));
        }
        return absl::OkStatus();
      },
      std::move(done));
}

void KvNcclPeers::Forget(const void* conn, std::function<void()> stopped) {
  auto it = peers_.find(conn);
  if (it == peers_.end()) {
    if (stopped && !shut_down_) post_(std::move(stopped));
    Reap();
    return;
  }
  *it->second.alive = false;
  if (stopped) {
    it->second.thread->NotifyWhenStopped(
        [post = post_, stopped = std::move(stopped)]() mutable { post(std::move(stopped)); });
  }
  it->second.thread->Interrupt();
  retired_.push_back(std::move(it->second.thread));
  peers_.erase(it);
  Reap();
}

void KvNcclPeers::Reap() {
  std::erase_if(retired_, [](const std::unique_ptr<KvChannelThread>& t) { return t->stopped(); });
}

}  // namespace pdserve
