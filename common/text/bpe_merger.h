// BpeMerger: the merge loop of byte-level BPE for one pre-tokenized piece.
// Internal to Tokenizer::Encode, which builds one per piece on its own stack;
// header-only so the loop inlines into Encode.
//
// Start with one symbol per byte (its byte-level token, or -1 when the
// vocabulary lacks that byte), then repeatedly apply the adjacent merge with
// the lowest rank, leftmost on ties, exactly like llama.cpp's
// llm_tokenizer_bpe_session. Not thread-safe; never shared.
#ifndef PDSERVE_COMMON_TEXT_BPE_MERGER_H_
#define PDSERVE_COMMON_TEXT_BPE_MERGER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <queue>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace pdserve {

struct BpeMerge {
  int32_t rank;    // index in tokenizer.ggml.merges; lower merges first
  int32_t result;  // token id of the merged symbol
};

// (left id << 32 | right id) -> merge. Keying by token id means encoding
// never builds strings.
using BpeMergeMap = absl::flat_hash_map<uint64_t, BpeMerge>;

inline uint64_t BpeMergeKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
}

// A doubly linked list of symbols and a min-heap of candidate merges
// ordered by (rank, left index). Candidates go stale when a neighbour
// merges first; they are recognised by the token ids they expected.
class BpeMerger {
 public:
  BpeMerger(const BpeMergeMap& merges, const std::array<int32_t, 256>& byte_token,
            std::string_view piece)
      : merges_(merges), piece_(piece), sym_(piece.size()) {
    const auto n = static_cast<int32_t>(piece.size());
    for (int32_t i = 0; i < n; ++i) {
      sym_[i] = {byte_token[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};
    }
    for (int32_t i = 0; i + 1 < n; ++i) Consider(i, i + 1);
  }

  void Run() {
    while (!heap_.empty()) {
      const Candidate c = heap_.top();
      heap_.pop();
      Symbol& l = sym_[c.left];
      Symbol& r = sym_[c.right];
      if (l.id != c.left_id || r.id != c.right_id) continue;  // stale
      l.id = c.result;
      r.id = kMerged;
      l.next = r.next;
      if (r.next >= 0) sym_[r.next].prev = c.left;
      Consider(l.prev, c.left);
      Consider(c.left, l.next);
    }
  }

  // Appends the final symbols; a byte without a token contributes its
  // fallback tokens (usually none), as in llama.cpp.
  void Emit(const std::array<std::vector<int32_t>, 256>& byte_fallback,
            std::vector<int32_t>* out) const {
    for (int32_t i = sym_.empty() ? -1 : 0; i >= 0; i = sym_[i].next) {
      if (sym_[i].id >= 0) {
        out->push_back(sym_[i].id);
      } else {
        const auto& fallback = byte_fallback[static_cast<uint8_t>(piece_[i])];
        out->insert(out->end(), fallback.begin(), fallback.end());
      }
    }
  }

 private:
  static constexpr int32_t kMerged = -2;  // absorbed into the symbol on its left

  struct Symbol {
    int32_t id;  // -1: a byte the vocabulary has no token for
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t right;
    int32_t left_id;
    int32_t right_id;
    int32_t result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };

  void Consider(int32_t left, int32_t right) {
    if (left < 0 || right < 0 || sym_[left].id < 0 || sym_[right].id < 0) return;
    const auto it = merges_.find(BpeMergeKey(sym_[left].id, sym_[right].id));
    if (it == merges_.end()) return;
    heap_.push({it->second.rank, left, right, sym_[left].id, sym_[right].id, it->second.result});
  }

  const BpeMergeMap& merges_;
  std::string_view piece_;
  std::vector<Symbol> sym_;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_TEXT_BPE_MERGER_H_
