#include "router/call/stop_matcher.h"

#include <algorithm>
#include <string>
#include <utility>

namespace pdserve::router {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopMatcher::Result StopMatcher::Push(std::string_view piece) {
  Result result;
  if (stopped_) return result;
  held_.append(piece);
  // Earliest match wins; a match cannot start in text already released,
  // because any such start would still have been held back.
  size_t match = std::string::npos;
  for (const std::string& stop : stops_) {
    match = std::min(match, held_.find(stop));
  }
  if (match != std::string::npos) {
    result.text = held_.substr(0, match);
    result.stopped = stopped_ = true;
    held_.clear();
    return result;
  }
  const size_t keep = PartialMatchLength();
  result.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return result;
}

std::string StopMatcher::Flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

size_t StopMatcher::PartialMatchLength() const {
  size_t best = 0;
  const std::string_view held(held_);
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(held.size(), stop.size() - 1);
    for (size_t len = max_len; len > best; --len) {
      if (held.substr(held.size() - len) == std::string_view(stop).substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

}  // namespace pdserve::router
