#include "common/kv_nccl_peers.h"

#include <atomic>
#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

namespace pdserve {

// One connection's channel and the thread that waits on it. Jobs run in
// submission order (the connection reads no further frame until a job's
// outcome is back, so there is at most one, but nothing relies on that).
class KvNcclPeers::Peer {
 public:
  using Job = std::function<absl::Status(Peer&)>;

  Peer() : alive_(std::make_shared<bool>(true)), thread_([this] { Run(); }) {}
  ~Peer() {
    Interrupt();
    thread_.join();
  }

  // I/O thread: queues `job`; its outcome reaches `done` through `post`
  // unless the peer was interrupted first.
  void Submit(Job job, Done done, const Post& post) {
    absl::MutexLock lock(&mu_);
    jobs_.push_back([this, job = std::move(job), done = std::move(done), alive = alive_, post] {
      const absl::Status st = job(*this);
      post([alive, done, st] {
        if (*alive) done(st);
      });
    });
  }

  // I/O thread: no `done` runs from here on; the job in progress (if a
  // receive) aborts promptly and the thread then ends.
  void Interrupt() {
    *alive_ = false;
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (channel_ != nullptr) channel_->Interrupt();
  }
  bool finished() const { return finished_.load(); }

  // Peer thread, inside a job.
  KvPeerChannel* channel() { return channel_.get(); }
  absl::Status Adopt(std::unique_ptr<KvPeerChannel> channel) {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("kv hello: the connection ended while joining");
    channel_ = std::move(channel);
    return absl::OkStatus();
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> job;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](Peer* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
              return p->stopping_ || !p->jobs_.empty();
            },
            this));
        if (stopping_) break;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
    std::unique_ptr<KvPeerChannel> channel;
    {
      absl::MutexLock lock(&mu_);
      channel = std::move(channel_);
      jobs_.clear();
    }
    channel.reset();  // tears the communicator down off the I/O thread
    finished_.store(true);
  }

  const std::shared_ptr<bool> alive_;  // read and written on the I/O thread only
  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Written under mu_ by the peer thread; read by it without the lock.
  std::unique_ptr<KvPeerChannel> channel_;
  std::atomic<bool> finished_{false};
  std::thread thread_;  // last: it starts running in the constructor
};

KvNcclPeers::KvNcclPeers(KvCache* cache, Post post, absl::Duration join_timeout,
                         absl::Duration frame_timeout)
    : cache_(cache),
      post_(std::move(post)),
      join_timeout_(join_timeout),
      frame_timeout_(frame_timeout) {}

KvNcclPeers::~KvNcclPeers() { Shutdown(); }

void KvNcclPeers::Shutdown() {
  shut_down_ = true;
  for (auto& [conn, peer] : peers_) peer->Interrupt();
  peers_.clear();  // joins
  retired_.clear();
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
  std::unique_ptr<Peer>& peer = peers_[conn];
  peer = std::make_unique<Peer>();
  const KvDeviceMemory* memory = cache_->device_memory();
  const absl::Time deadline = absl::Now() + join_timeout_;
  peer->Submit(
      [memory, id = header.nccl_id(), deadline](Peer& p) -> absl::Status {
        absl::StatusOr<std::unique_ptr<KvPeerChannel>> channel =
            memory->JoinPeerChannel(id, /*rank=*/1, deadline);
        if (!channel.ok()) {
          return absl::Status(
              channel.status().code(),
              absl::StrCat("kv hello: joining the NCCL channel: ", channel.status().message()));
        }
        return p.Adopt(std::move(*channel));
      },
      std::move(done), post_);
  return absl::OkStatus();
}

void KvNcclPeers::Receive(const void* conn, const v1::KvFrameHeader& header,
                          std::vector<uint8_t*> dst, Done done) {
  auto it = peers_.find(conn);
  if (it == peers_.end() || shut_down_) {
    post_([done = std::move(done)] {
      done(absl::FailedPreconditionError("kv frame: an nccl layer before any NCCL_HELLO"));
    });
    return;
  }
  if (dst.size() != static_cast<size_t>(header.block_indices_size())) {
    post_([done = std::move(done)] {
      done(absl::InternalError("kv frame: destination count differs from the frame's blocks"));
    });
    return;
  }
  const size_t bpb = static_cast<size_t>(cache_->layout().bytes_per_layer_block());
  const absl::Duration timeout = frame_timeout_;
  it->second->Submit(
      [dst = std::move(dst), bpb, timeout](Peer& p) -> absl::Status {
        KvPeerChannel* channel = p.channel();
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
      std::move(done), post_);
}

void KvNcclPeers::Stop(const void* conn) {
  auto it = peers_.find(conn);
  if (it == peers_.end()) return;
  it->second->Interrupt();
  peers_.erase(it);  // joins: the receive has let go of its blocks
}

void KvNcclPeers::Forget(const void* conn) {
  auto it = peers_.find(conn);
  if (it != peers_.end()) {
    it->second->Interrupt();
    retired_.push_back(std::move(it->second));
    peers_.erase(it);
  }
  Reap();
}

void KvNcclPeers::Reap() {
  std::erase_if(retired_, [](const std::unique_ptr<Peer>& p) { return p->finished(); });
}

}  // namespace pdserve
