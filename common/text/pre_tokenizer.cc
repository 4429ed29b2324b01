#include "common/text/pre_tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "common/text/unicode_tables.h"
#include "common/text/utf8.h"
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

// llama.cpp's hand-written matcher for the LLaMA 3 regex (unicode.cpp,
// unicode_regex_split_custom_llama3), over units [begin, end):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// and, with max_digits 1, Qwen2's, which differs only in \p{N}.
class Llama3Matcher {
 public:
  Llama3Matcher(const std::vector<Unit>& units, size_t end, size_t max_digits)
      : units_(units), end_(end), max_digits_(max_digits) {}

  size_t MatchAt(size_t pos) const {
    if (const size_t n = MatchContraction(pos); n != 0) return n;
    const char32_t cp = units_[pos].cp;
    const bool newline = cp == '\r' || cp == '\n';
    // [^\r\n\p{L}\p{N}]?\p{L}+: any one non-letter, non-number, non-newline
    // joins the letters after it.
    if (!newline && !Is(pos, CodepointClass::kNumber) &&
        (Is(pos, CodepointClass::kLetter) || Is(pos + 1, CodepointClass::kLetter))) {
      size_t i = pos + 1;
      while (Is(i, CodepointClass::kLetter)) ++i;
      return i;
    }
    if (Is(pos, CodepointClass::kNumber)) {  // \p{N}{1,max_digits}
      size_t i = pos;
      while (i - pos < max_digits_ && Is(i, CodepointClass::kNumber)) ++i;
      return i;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    const size_t first = cp == ' ' ? pos + 1 : pos;
    if (Is(first, CodepointClass::kOther)) {
      size_t i = first;
      while (Is(i, CodepointClass::kOther)) ++i;
      while (IsNewline(i)) ++i;
      return i;
    }
    size_t run = pos;
    size_t after_last_newline = 0;
    for (; Is(run, CodepointClass::kWhitespace); ++run) {
      if (IsNewline(run)) after_last_newline = run + 1;
    }
    if (after_last_newline != 0) return after_last_newline;  // \s*[\r\n]+
    if (run - pos > 1 && run < end_) return run - 1;         // \s+(?!\S)
    if (run > pos) return run;                               // \s+
    return pos + 1;
  }

 private:
  bool Is(size_t i, CodepointClass cls) const { return i < end_ && units_[i].cls == cls; }
  bool IsNewline(size_t i) const {
    return i < end_ && (units_[i].cp == '\r' || units_[i].cp == '\n');
  }
  char32_t LowerAt(size_t i) const {
    const char32_t c = i < end_ ? units_[i].cp : 0;
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
  }

  // Case-insensitive contractions. Returns the end or 0.
  size_t MatchContraction(size_t pos) const {
    if (units_[pos].cp != '\'') return 0;
    const char32_t a = LowerAt(pos + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    const char32_t b = LowerAt(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
      return pos + 3;
    }
    return 0;
  }

  const std::vector<Unit>& units_;
  size_t end_;
  size_t max_digits_;
};

void AppendPiece(std::string_view text, const std::vector<Unit>& units, size_t begin, size_t end,
                 std::vector<std::string_view>* pieces) {
  const size_t from = units[begin].offset;
  pieces->push_back(text.substr(from, units[end].offset - from));
}

// Calls emit(begin, end) for each GPT-2 piece of units [begin, end).
template <typename Emit>
void ForEachGpt2Piece(const std::vector<Unit>& units, size_t begin, size_t end, Emit emit) {
  const Gpt2Matcher matcher(units, end);
  for (size_t pos = begin; pos < end;) {
    const size_t next = matcher.MatchAt(pos);
    emit(pos, next);
    pos = next;
  }
}

void SplitGpt2(std::string_view text, const std::vector<Unit>& units, size_t begin, size_t end,
               std::vector<std::string_view>* pieces) {
  ForEachGpt2Piece(units, begin, end,
                   [&](size_t b, size_t e) { AppendPiece(text, units, b, e, pieces); });
}

// How llama.cpp's std::regex stages split a range: every maximal run of
// units `in_run` accepts is a piece, and so is every stretch between runs.
// `max_run` > 0 cuts runs into pieces of exactly that length, leaving what
// is shorter to the stretch after it ([0-9][0-9][0-9] matched repeatedly).
template <typename InRun, typename Emit>
void SplitRuns(size_t begin, size_t end, InRun in_run, size_t max_run, Emit emit) {
  size_t gap = begin;
  for (size_t i = begin; i < end;) {
    size_t j = i;
    while (j < end && in_run(j) && (max_run == 0 || j - i < max_run)) ++j;
    if (j == i || (max_run != 0 && j - i < max_run)) {
      i = j == i ? i + 1 : j;
      continue;
    }
    if (gap < i) emit(gap, i);
    emit(i, j);
    gap = i = j;
  }
  if (gap < end) emit(gap, end);
}

// [\p{P}\$\+<=>\^~\|] as llama.cpp collapses it: ASCII punctuation and
// these symbols (not the backtick), and non-ASCII punctuation.
bool IsDefaultPunctuation(const Unit& u) {
  if (u.cp < 0x80) {
    return unicode_internal::AsciiPunctuation(u.cp) || u.cp == '$' || u.cp == '+' || u.cp == '<' ||
           u.cp == '=' || u.cp == '>' || u.cp == '^' || u.cp == '~' || u.cp == '|';
  }
  return u.cls != CodepointClass::kWhitespace && IsPunctuation(u.cp);
}

void SplitDefault(std::string_view text, const std::vector<Unit>& units,
                  std::vector<std::string_view>* pieces) {
  auto emit = [&](size_t b, size_t e) { AppendPiece(text, units, b, e, pieces); };
  auto digit_groups = [&](size_t b, size_t e) {
    SplitRuns(
        b, e, [&](size_t i) { return units[i].cp >= '0' && units[i].cp <= '9'; }, 3, emit);
  };
  auto numbers = [&](size_t b, size_t e) {
    SplitRuns(
        b, e, [&](size_t i) { return units[i].cls == CodepointClass::kNumber; }, 0, digit_groups);
  };
  auto gpt2 = [&](size_t b, size_t e) { ForEachGpt2Piece(units, b, e, numbers); };
  SplitRuns(
      0, units.size() - 1, [&](size_t i) { return IsDefaultPunctuation(units[i]); }, 0, gpt2);
}

void SplitLlama3(std::string_view text, const std::vector<Unit>& units, size_t max_digits,
                 std::vector<std::string_view>* pieces) {
  const size_t end = units.size() - 1;  // without the sentinel
  const Llama3Matcher matcher(units, end, max_digits);
  for (size_t pos = 0; pos < end;) {
    const size_t next = matcher.MatchAt(pos);
    AppendPiece(text, units, pos, next, pieces);
    pos = next;
  }
}

}  // namespace

std::optional<PreTokenizerType> FindPreTokenizerType(std::string_view name) {
  for (std::string_view smollm_like :
       {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"}) {
    if (name == smollm_like) return PreTokenizerType::kSmollm;
  }
  for (std::string_view llama3_like :
       {"llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe"}) {
    if (name == llama3_like) return PreTokenizerType::kLlama3;
  }
  // llama.cpp gives these the same regex (LLAMA_VOCAB_PRE_TYPE_QWEN2,
  // STABLELM2).
  for (std::string_view qwen2_like : {"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"}) {
    if (name == qwen2_like) return PreTokenizerType::kQwen2;
  }
  if (name == "default") return PreTokenizerType::kDefault;
  for (std::string_view gpt2_like : {"gpt2", "gpt-2", "mpt", "olmo", "jais", "phi-2"}) {
    if (name == gpt2_like) return PreTokenizerType::kGpt2;
  }
  return std::nullopt;
}

PreTokenizerType PreTokenizerTypeFromName(std::string_view name) {
  if (const std::optional<PreTokenizerType> type = FindPreTokenizerType(name)) return *type;
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
  if (type_ == PreTokenizerType::kLlama3 || type_ == PreTokenizerType::kQwen2) {
    SplitLlama3(text, units, type_ == PreTokenizerType::kLlama3 ? 3 : 1, pieces);
    return;
  }
  if (type_ == PreTokenizerType::kDefault) {
    SplitDefault(text, units, pieces);
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
