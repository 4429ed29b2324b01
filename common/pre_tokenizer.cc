#include "common/pre_tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/unicode_tables.h"
#include "common/utf8.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

// One code point of the input, or one ill-formed UTF-8 subpart standing in
// for U+FFFD. The vector of units carries a sentinel whose offset is the
// text size, so unit i spans bytes [units[i].offset, units[i + 1].offset).
struct Unit {
  size_t offset;
  char32_t cp;
  CodepointClass cls;
};

std::vector<Unit> DecodeUnits(std::string_view text) {
  std::vector<Unit> units;
  units.reserve(text.size() + 1);
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Char c = DecodeUtf8(text, pos);
    if (c.status == Utf8Status::kOk) {
      units.push_back({pos, c.cp, ClassifyCodepoint(c.cp)});
    } else {
      units.push_back({pos, kReplacementChar, CodepointClass::kOther});
    }
    pos += c.length;
  }
  units.push_back({text.size(), 0, CodepointClass::kOther});
  return units;
}

// llama.cpp's hand-written matcher for the GPT-2 regex (unicode.cpp,
// unicode_regex_split_custom_gpt2), over units [begin, end). Matching never
// looks past `end`, which is what makes each split stage independent.
class Gpt2Matcher {
 public:
  Gpt2Matcher(const std::vector<Unit>& units, size_t end) : units_(units), end_(end) {}

  // Returns the index one past the piece that starts at unit `pos`.
  size_t MatchAt(size_t pos) const {
    if (const size_t n = MatchContraction(pos); n != 0) return n;
    // " ?X+" for X in {letter, number, other}: an ASCII space joins the run
    // of whatever class follows it.
    const bool space = units_[pos].cp == ' ';
    const int cls = ClassAt(space ? pos + 1 : pos);
    if (cls != kOutside && cls != static_cast<int>(CodepointClass::kWhitespace)) {
      size_t i = space ? pos + 1 : pos;
      while (ClassAt(i) == cls) ++i;
      return i;
    }
    // \s+(?!\S) then \s+: a space run followed by a non-space gives up its
    // last character, so the next word keeps its leading space.
    size_t i = pos;
    while (ClassAt(i) == static_cast<int>(CodepointClass::kWhitespace)) ++i;
    if (i - pos > 1 && i < end_) return i - 1;
    return i;
  }

 private:
  static constexpr int kOutside = -1;

  int ClassAt(size_t i) const { return i < end_ ? static_cast<int>(units_[i].cls) : kOutside; }
  char32_t CpAt(size_t i) const { return i < end_ ? units_[i].cp : 0; }

  // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive). Returns the end or 0.
  size_t MatchContraction(size_t pos) const {
    if (units_[pos].cp != '\'') return 0;
    const char32_t a = CpAt(pos + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    const char32_t b = CpAt(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
      return pos + 3;
    }
    return 0;
  }

  const std::vector<Unit>& units_;
  size_t end_;
};

void AppendPiece(std::string_view text, const std::vector<Unit>& units, size_t begin, size_t end,
                 std::vector<std::string_view>* pieces) {
  const size_t from = units[begin].offset;
  pieces->push_back(text.substr(from, units[end].offset - from));
}

void SplitGpt2(std::string_view text, const std::vector<Unit>& units, size_t begin, size_t end,
               std::vector<std::string_view>* pieces) {
  const Gpt2Matcher matcher(units, end);
  size_t pos = begin;
  while (pos < end) {
    const size_t next = matcher.MatchAt(pos);
    AppendPiece(text, units, pos, next, pieces);
    pos = next;
  }
}

}  // namespace

PreTokenizerType PreTokenizerTypeFromName(std::string_view name) {
  for (std::string_view smollm_like :
       {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"}) {
    if (name == smollm_like) return PreTokenizerType::kSmollm;
  }
  for (std::string_view gpt2_like : {"gpt2", "gpt-2", "default", "mpt", "olmo", "jais", "phi-2"}) {
    if (name == gpt2_like) return PreTokenizerType::kGpt2;
  }
  LOG(WARNING) << "unknown pre-tokenizer type '" << name
               << "'; falling back to the GPT-2 regex, tokens may differ from the model's";
  return PreTokenizerType::kGpt2;
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  const std::vector<Unit> units = DecodeUnits(text);
  const size_t n = units.size() - 1;  // without the sentinel
  if (type_ == PreTokenizerType::kGpt2) {
    SplitGpt2(text, units, 0, n, pieces);
    return;
  }
  // kSmollm: each number code point is a piece of its own; the GPT-2 regex
  // only sees the stretches between them.
  size_t run_begin = 0;
  for (size_t i = 0; i < n; ++i) {
    if (units[i].cls != CodepointClass::kNumber) continue;
    SplitGpt2(text, units, run_begin, i, pieces);
    AppendPiece(text, units, i, i + 1, pieces);
    run_begin = i + 1;
  }
  SplitGpt2(text, units, run_begin, n, pieces);
}

}  // namespace pdserve
