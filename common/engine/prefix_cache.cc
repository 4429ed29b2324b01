#include "common/engine/prefix_cache.h"

#include <algorithm>

#include "glog/logging.h"

namespace pdserve {

PrefixCache::PrefixCache(int32_t num_blocks) : entries_(num_blocks) {}

int32_t PrefixCache::Find(uint64_t key, absl::Span<const int32_t> tokens) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return -1;
  const std::vector<int32_t>& held = entries_[it->second].tokens;
  if (!std::equal(held.begin(), held.end(), tokens.begin(), tokens.end())) return -1;
  return it->second;
}

bool PrefixCache::Insert(uint64_t key, absl::Span<const int32_t> tokens, int32_t block) {
  Entry& e = entries_[block];
  if (e.cached || by_key_.contains(key)) return false;
  e.cached = true;
  e.key = key;
  e.tokens.assign(tokens.begin(), tokens.end());
  by_key_.emplace(key, block);
  ++version_;
  return true;
}

void PrefixCache::Park(int32_t block) {
  Entry& e = entries_[block];
  CHECK(e.cached && !e.parked) << "park of kv block " << block;
  e.parked = true;
  e.lru_pos = lru_.insert(lru_.end(), block);
  ++version_;
}

void PrefixCache::Unpark(int32_t block) {
  Entry& e = entries_[block];
  CHECK(e.parked) << "unpark of kv block " << block;
  lru_.erase(e.lru_pos);
  e.parked = false;
  ++version_;
}

int32_t PrefixCache::EvictOldest() {
  if (lru_.empty()) return -1;
  const int32_t block = lru_.front();
  lru_.pop_front();
  Entry& e = entries_[block];
  by_key_.erase(e.key);
  e = Entry();
  ++version_;
  return block;
}

std::vector<uint64_t> PrefixCache::RecentKeys(int32_t max) const {
  std::vector<uint64_t> keys;
  for (const Entry& e : entries_) {
    if (static_cast<int32_t>(keys.size()) >= max) return keys;
    if (e.cached && !e.parked) keys.push_back(e.key);
  }
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    if (static_cast<int32_t>(keys.size()) >= max) break;
    keys.push_back(entries_[*it].key);
  }
  return keys;
}

}  // namespace pdserve
