#include "common/kv/kv_epoch_fence.h"

#include <algorithm>
#include <utility>

#include "glog/logging.h"

namespace pdserve {

void KvEpochFence::Open(uint64_t transfer_id, uint64_t epoch) {
  auto [it, inserted] = current_.try_emplace(transfer_id);
  CHECK(inserted) << "kv transfer " << transfer_id << ": epoch " << epoch
                  << " opened over a current one";
  it->second.epoch = epoch;
}

KvEpochFence::Ended KvEpochFence::End(uint64_t transfer_id) {
  auto it = current_.find(transfer_id);
  CHECK(it != current_.end()) << "kv transfer " << transfer_id << ": no current epoch to end";
  Current current = std::move(it->second);
  current_.erase(it);
  Ended ended;
  ended.released = std::move(current.held);
  // An older epoch of the transfer may still write into the same blocks:
  // they are not the receiver's to hand back before it stops either.
  if (current.channel_writers.empty() && !Fenced(transfer_id)) return ended;
  ended.waits_as = next_ticket_++;
  ending_.push_back(
      Ending{*ended.waits_as, transfer_id, current.epoch, std::move(current.channel_writers)});
  return ended;
}

bool KvEpochFence::Fenced(uint64_t transfer_id) const {
  return std::any_of(ending_.begin(), ending_.end(),
                     [transfer_id](const Ending& e) { return e.transfer_id == transfer_id; });
}

bool KvEpochFence::HoldIfFenced(uint64_t transfer_id, const ConnPtr& conn,
                                const v1::KvFrameHeader& header) {
  if (!Fenced(transfer_id)) return false;
  auto it = current_.find(transfer_id);
  CHECK(it != current_.end()) << "kv transfer " << transfer_id << ": a frame held for no epoch";
  it->second.held.push_back(HeldFrame{conn, header});
  return true;
}

std::vector<KvEpochFence::HeldFrame> KvEpochFence::Unfence(uint64_t transfer_id) {
  auto it = current_.find(transfer_id);
  if (it == current_.end() || Fenced(transfer_id)) return {};
  return std::exchange(it->second.held, {});
}

void KvEpochFence::BeginChannelWrite(uint64_t transfer_id, const ConnPtr& conn) {
  auto it = current_.find(transfer_id);
  CHECK(it != current_.end()) << "kv transfer " << transfer_id << ": a receive for no epoch";
  it->second.channel_writers.insert(conn);
}

bool KvEpochFence::EndChannelWrite(uint64_t transfer_id, const ConnPtr& conn) {
  auto it = current_.find(transfer_id);
  return it != current_.end() && it->second.channel_writers.erase(conn) > 0;
}

bool KvEpochFence::FeedsEnded(const ConnPtr& conn) const {
  return std::any_of(ending_.begin(), ending_.end(),
                     [&conn](const Ending& e) { return e.channel_writers.contains(conn); });
}

std::optional<uint64_t> KvEpochFence::SettleChannel(const ConnPtr& conn) {
  for (Ending& e : ending_) {
    if (e.channel_writers.erase(conn) > 0) return e.transfer_id;
  }
  return std::nullopt;
}

std::vector<KvEpochFence::Ending>::iterator KvEpochFence::Oldest(uint64_t transfer_id) {
  auto oldest = ending_.end();
  for (auto it = ending_.begin(); it != ending_.end(); ++it) {
    if (it->transfer_id == transfer_id && (oldest == ending_.end() || it->epoch < oldest->epoch)) {
      oldest = it;
    }
  }
  return oldest;
}

std::optional<KvEpochFence::Ticket> KvEpochFence::NextSettled(uint64_t transfer_id) {
  // An epoch's blocks are the next one's too: the newer ones wait for it.
  auto oldest = Oldest(transfer_id);
  if (oldest == ending_.end() || !oldest->channel_writers.empty()) return std::nullopt;
  const Ticket ticket = oldest->ticket;
  ending_.erase(oldest);
  return ticket;
}

std::vector<KvEpochFence::ConnPtr> KvEpochFence::EndedWriters(uint64_t transfer_id) const {
  std::vector<ConnPtr> conns;
  for (const Ending& e : ending_) {
    if (e.transfer_id != transfer_id) continue;
    conns.insert(conns.end(), e.channel_writers.begin(), e.channel_writers.end());
  }
  return conns;
}

std::vector<uint64_t> KvEpochFence::DropConnection(const ConnPtr& conn) {
  std::vector<uint64_t> fed;
  for (auto& [transfer_id, current] : current_) {
    if (current.channel_writers.contains(conn)) fed.push_back(transfer_id);
    // A held frame of a closed connection will never be read: nothing of
    // it was claimed.
    std::erase_if(current.held, [&conn](const HeldFrame& f) { return f.conn == conn; });
  }
  return fed;
}

std::vector<KvEpochFence::Ticket> KvEpochFence::TakeAllEnded() {
  std::vector<Ticket> tickets;
  tickets.reserve(ending_.size());
  for (const Ending& e : ending_) tickets.push_back(e.ticket);
  ending_.clear();
  return tickets;
}

}  // namespace pdserve
