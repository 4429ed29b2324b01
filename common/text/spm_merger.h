// SpmMerger: the merge loop of SentencePiece-style BPE ("llama" vocabularies:
// LLaMA 1/2, Mistral, TinyLlama, ...) for one stretch of raw text whose spaces
// the caller has already escaped to U+2581. Internal to Tokenizer::Encode,
// which builds one per stretch on its own stack; header-only so the loop
// inlines into Encode.
//
// Reproduces llama.cpp's llm_tokenizer_spm_session: start with one symbol per
// UTF-8 character (its length taken from the lead byte alone), then
// repeatedly merge the adjacent pair whose concatenation is a token with the
// highest score, leftmost on ties. There is no merge table: the scores rank
// the merges. A final symbol that is not a token is split back along the
// merges that built it, and what remains falls back to byte tokens
// ("<0x41>"). Not thread-safe; never shared.
#ifndef PDSERVE_COMMON_TEXT_SPM_MERGER_H_
#define PDSERVE_COMMON_TEXT_SPM_MERGER_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace pdserve {

using TokenTextMap = absl::flat_hash_map<std::string_view, int32_t>;

class SpmMerger {
 public:
  // `byte_token[b]` is the token a byte without a better token becomes
  // (-1: none, the byte is dropped). All references must outlive the merger.
  SpmMerger(const TokenTextMap& text_to_id, const std::vector<float>& scores,
            const std::array<int32_t, 256>& byte_token, std::string_view text)
      : text_to_id_(text_to_id), scores_(scores), byte_token_(byte_token), text_(text) {
    size_t offset = 0;
    while (offset < text.size()) {
      const size_t n = std::min(LeadByteLength(text[offset]), text.size() - offset);
      const auto index = static_cast<int32_t>(sym_.size());
      sym_.push_back({offset, n, index - 1, offset + n == text.size() ? -1 : index + 1});
      offset += n;
    }
    for (int32_t i = 1; i < static_cast<int32_t>(sym_.size()); ++i) Consider(i - 1, i);
  }

  void Run() {
    while (!heap_.empty()) {
      const Candidate c = heap_.top();
      heap_.pop();
      Symbol& l = sym_[c.left];
      Symbol& r = sym_[c.right];
      // A candidate is stale once either side merged with someone else.
      if (l.n == 0 || r.n == 0 || l.n + r.n != c.size) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) sym_[r.next].prev = c.left;
      Consider(l.prev, c.left);
      Consider(c.left, l.next);
    }
  }

  void Emit(std::vector<int32_t>* out) const {
    for (int32_t i = sym_.empty() ? -1 : 0; i >= 0; i = sym_[i].next) Resegment(sym_[i], out);
  }

 private:
  struct Symbol {
    size_t offset;
    size_t n;  // bytes; 0 once merged into the symbol on its left
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    float score;
    int32_t left;
    int32_t right;
    size_t size;
    // Max-heap order: higher score first, then the leftmost pair.
    bool operator<(const Candidate& o) const {
      return score < o.score || (score == o.score && left > o.left);
    }
  };

  // llama.cpp's unicode_len_utf8: continuation and invalid lead bytes
  // count as one-byte characters.
  static size_t LeadByteLength(char c) {
    static constexpr size_t kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLength[static_cast<uint8_t>(c) >> 4];
  }

  std::string_view Text(const Symbol& s) const { return text_.substr(s.offset, s.n); }

  int32_t Find(std::string_view text) const {
    const auto it = text_to_id_.find(text);
    return it == text_to_id_.end() ? -1 : it->second;
  }

  void Consider(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::string_view text = text_.substr(sym_[left].offset, sym_[left].n + sym_[right].n);
    const int32_t id = Find(text);
    if (id < 0) return;
    heap_.push({scores_[id], left, right, text.size()});
    rev_merge_[text] = {left, right};
  }

  void Resegment(const Symbol& s, std::vector<int32_t>* out) const {
    const std::string_view text = Text(s);
    if (const int32_t id = Find(text); id >= 0) {
      out->push_back(id);
      return;
    }
    const auto it = rev_merge_.find(text);
    if (it == rev_merge_.end()) {
      for (const char c : text) {
        const int32_t id = byte_token_[static_cast<uint8_t>(c)];
        if (id >= 0) out->push_back(id);
      }
      return;
    }
    Resegment(sym_[it->second.first], out);
    Resegment(sym_[it->second.second], out);
  }

  const TokenTextMap& text_to_id_;
  const std::vector<float>& scores_;
  const std::array<int32_t, 256>& byte_token_;
  std::string_view text_;
  std::vector<Symbol> sym_;
  std::priority_queue<Candidate> heap_;
  absl::flat_hash_map<std::string_view, std::pair<int32_t, int32_t>> rev_merge_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_TEXT_SPM_MERGER_H_
