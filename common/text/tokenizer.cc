// Deviations from llama.cpp (llama-vocab.cpp / unicode.cpp, early 2025),
// none of which changes any result for well-formed UTF-8 of assigned characters with SmolLM2:
//  - Ill-formed UTF-8 is tokenized (bad bytes keep their values, classed like
//    U+FFFD) instead of aborting the process.
//  - Malformed vocabularies are rejected at load (missing arrays, length
//    mismatch, a merge without a separator or whose halves or result are not
//    tokens, special ids out of range) instead of being patched with
//    warnings or junk entries. Requiring merge
//    results to be tokens (as HF tokenizers does) makes llama.cpp's "unknown
//    final symbol" fallback reachable only for single bytes the vocabulary
//    lacks; that case is reproduced exactly (byte_fallback_).
//  - NORMAL token text outside the byte-level alphabet decodes to its own
//    UTF-8 instead of "[UNK_BYTE_0x..]"; empty token texts are never matched
//    as special tokens (llama.cpp renames them "[EMPTY_i]").
//  - EOG detection adds every FIM pad/repo/sep candidate text, not the one
//    llama.cpp happens to meet first while iterating a hash map.
//  - Per-model LSTRIP/RSTRIP special-token hacks (phi-3, jina) are absent.
//  - SentencePiece: a byte with neither a "<0xNN>" nor a one-byte token
//    becomes the unknown token (llama.cpp throws and the process dies).
//  - Unassigned code points count as punctuation in every pre-tokenizer
//    (llama.cpp gives each its own piece). No assigned character differs.
#include "common/text/tokenizer.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"
#include "common/text/byte_level.h"
#include "common/text/utf8.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

// End-of-generation texts as llama.cpp (0.3.36's llama-vocab) finds them
// when the metadata does not name them; a normal token among them becomes
// CONTROL there ("control-looking token"), so "</s>" typed as text is no
// longer that token unless special tokens are parsed.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>",      "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<|end_of_text|>", "<EOT>",   "</s>",
};
// llama.cpp also takes DeepSeek's end-of-sentence text as EOT when no eot
// id is given, and treats FIM pad/repo/sep tokens as end of generation.
constexpr std::string_view kDeepSeekEot = "<｜end▁of▁sentence｜>";
constexpr std::string_view kFimEogTexts[] = {
    "<|fim_pad|>",   "<fim-pad>",  "<PAD>",  "<|fim_repo|>", "<|repo_name|>",
    "<fim-repo>",    "<REPO>",     "<reponame>", "<|file_sep|>",
};

// This abseil build's string_view is not std::string_view.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// SentencePiece's visible space, U+2581.
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

std::string UnescapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.substr(pos, kSpmSpace.size()) == kSpmSpace) {
      out.push_back(' ');
      pos += kSpmSpace.size();
    } else {
      out.push_back(text[pos++]);
    }
  }
  return out;
}

// "<0x41>" -> "A"; anything else (a malformed BYTE token) -> "".
std::string ByteTokenValue(std::string_view text) {
  int value = 0;
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>' ||
      !absl::SimpleHexAtoi(Sv(text.substr(3, 2)), &value)) {
    return {};
  }
  return std::string(1, static_cast<char>(value));
}

std::string DecodeByteLevel(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Char c = DecodeUtf8(text, pos);
    const int byte = c.status == Utf8Status::kOk ? SymbolToByte(c.cp) : -1;
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(text.substr(pos, c.length));
    }
    pos += c.length;
  }
  return out;
}

absl::StatusOr<int32_t> TokenId(const GgufFile& gguf, std::string_view key) {
  ASSIGN_OR_RETURN(const uint64_t id, gguf.GetUint(key));
  if (id > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(key), " = ", id, " is not a token id"));
  }
  return static_cast<int32_t>(id);
}

}  // namespace

struct Tokenizer::Fragment {
  int32_t token;  // -1 for raw text
  size_t begin;
  size_t length;
};

Tokenizer::Tokenizer(bool spm, PreTokenizerType pre)
    : spm_(spm), ignore_merges_(!spm && pre == PreTokenizerType::kLlama3), pre_tokenizer_(pre) {}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& gguf) {
  TokenizerVocab v;
  ASSIGN_OR_RETURN(const std::string_view model, gguf.GetString("tokenizer.ggml.model"));
  v.model = std::string(model);
  const bool spm = v.model == "llama";
  if (spm) {  // llama.cpp's defaults for SentencePiece vocabularies
    v.bos_id = 1;
    v.eos_id = 2;
    v.unk_id = 0;
    v.add_bos = true;
  }
  if (gguf.Find("tokenizer.ggml.pre") != nullptr) {
    ASSIGN_OR_RETURN(const std::string_view pre, gguf.GetString("tokenizer.ggml.pre"));
    v.pre = std::string(pre);
    // llama.cpp adds BOS for these unless the file says otherwise.
    for (std::string_view bos_pre : {"llama3", "llama-v3", "llama-bpe", "falcon3"}) {
      if (!spm && pre == bos_pre) v.add_bos = true;
    }
  } else if (!spm) {
    LOG(WARNING) << "the GGUF has no tokenizer.ggml.pre: using llama.cpp's 'default' "
                    "pre-tokenizer, as llama.cpp does (which warns that generation quality "
                    "may be degraded; newer conversions of the model name its pre-tokenizer)";
  }
  ASSIGN_OR_RETURN(const auto tokens, gguf.GetStringArray("tokenizer.ggml.tokens"));
  v.tokens.assign(tokens.begin(), tokens.end());
  if (gguf.Find("tokenizer.ggml.token_type") != nullptr) {
    ASSIGN_OR_RETURN(const auto types, gguf.GetIntArray("tokenizer.ggml.token_type"));
    v.token_types.assign(types.begin(), types.end());
  } else {  // llama.cpp takes every token as NORMAL
    v.token_types.assign(v.tokens.size(), static_cast<int32_t>(TokenType::kNormal));
  }
  if (!spm || gguf.Find("tokenizer.ggml.merges") != nullptr) {
    ASSIGN_OR_RETURN(const auto merges, gguf.GetStringArray("tokenizer.ggml.merges"));
    v.merges.assign(merges.begin(), merges.end());
  }
  if (spm && gguf.Find("tokenizer.ggml.scores") != nullptr) {
    ASSIGN_OR_RETURN(const auto scores, gguf.GetFloatArray("tokenizer.ggml.scores"));
    v.scores.assign(scores.begin(), scores.end());
  }
  const std::pair<const char*, int32_t*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos_id},
      {"tokenizer.ggml.eos_token_id", &v.eos_id},
      {"tokenizer.ggml.eot_token_id", &v.eot_id},
      {"tokenizer.ggml.eom_token_id", &v.eom_id},
      {"tokenizer.ggml.unknown_token_id", &v.unk_id},
      {"tokenizer.ggml.fim_pad_token_id", &v.fim_pad_id},
      {"tokenizer.ggml.fim_rep_token_id", &v.fim_rep_id},
      {"tokenizer.ggml.fim_sep_token_id", &v.fim_sep_id},
  };
  for (const auto& [key, field] : ids) {
    if (gguf.Find(key) == nullptr) continue;
    ASSIGN_OR_RETURN(*field, TokenId(gguf, key));
  }
  const std::pair<const char*, bool*> flags[] = {
      {"tokenizer.ggml.add_bos_token", &v.add_bos},
      {"tokenizer.ggml.add_eos_token", &v.add_eos},
      {"tokenizer.ggml.add_space_prefix", &v.add_space_prefix},
  };
  for (const auto& [key, field] : flags) {
    if (gguf.Find(key) == nullptr) continue;
    ASSIGN_OR_RETURN(*field, gguf.GetBool(key));
  }
  return FromVocab(v);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromVocab(const TokenizerVocab& vocab) {
  if (vocab.model != "gpt2" && vocab.model != "llama") {
    return absl::UnimplementedError(absl::StrCat("tokenizer.ggml.model '", vocab.model,
                                                 "' is not supported (only gpt2 and llama)"));
  }
  const bool spm = vocab.model == "llama";
  std::unique_ptr<Tokenizer> t(
      new Tokenizer(spm, spm ? PreTokenizerType::kGpt2 : PreTokenizerTypeFromName(vocab.pre)));
  RETURN_IF_ERROR(t->Init(vocab));
  return t;
}

absl::Status Tokenizer::Init(const TokenizerVocab& vocab) {
  RETURN_IF_ERROR(InitTokens(vocab));
  if (spm_) {
    RETURN_IF_ERROR(InitScores(vocab));
  } else {
    RETURN_IF_ERROR(InitMerges(vocab.merges));
  }
  RETURN_IF_ERROR(InitSpecialIds(vocab));
  if (spm_) {
    InitSpmByteTokens();
  } else {
    InitByteMaps();
  }
  InitEog(vocab);  // may retype tokens as CONTROL, so before the two below
  InitSpecialTokens();
  InitDecodedBytes();
  return absl::OkStatus();
}

absl::Status Tokenizer::InitTokens(const TokenizerVocab& vocab) {
  const size_t n = vocab.tokens.size();
  if (n == 0) return absl::InvalidArgumentError("tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError("tokenizer.ggml.tokens has too many entries");
  }
  if (vocab.token_types.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.ggml.token_type has ",
                                                   vocab.token_types.size(),
                                                   " entries but tokenizer.ggml.tokens has ", n));
  }
  size_t total = 0;
  for (const std::string& s : vocab.tokens) total += s.size();
  if (total >= std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError("tokenizer.ggml.tokens is too large");
  }
  text_arena_.reserve(total);
  text_offsets_.reserve(n + 1);
  types_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    text_offsets_.push_back(static_cast<uint32_t>(text_arena_.size()));
    text_arena_ += vocab.tokens[i];
    const int32_t type = vocab.token_types[i];
    const bool known = type >= static_cast<int32_t>(TokenType::kNormal) &&
                       type <= static_cast<int32_t>(TokenType::kByte);
    types_.push_back(known ? static_cast<TokenType>(type) : TokenType::kUndefined);
  }
  text_offsets_.push_back(static_cast<uint32_t>(text_arena_.size()));
  text_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // Later duplicates win, as in llama.cpp's token_to_id map.
    text_to_id_[TokenText(static_cast<int32_t>(i))] = static_cast<int32_t>(i);
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::InitMerges(const std::vector<std::string>& merges) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view m = merges[rank];
    // Split at the first space after the first byte, as llama.cpp does, so
    // a left half that begins with a space still parses.
    const size_t space = m.find(' ', 1);
    if (space == std::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.ggml.merges[", rank, "] '", Sv(m), "' is not 'left right'"));
    }
    const std::string_view left = m.substr(0, space);
    const std::string_view right = m.substr(space + 1);
    const int32_t l = FindToken(left);
    const int32_t r = FindToken(right);
    std::string merged(left);
    merged += right;
    const int32_t result = FindToken(merged);
    if (l < 0 || r < 0 || result < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.ggml.merges[", rank, "] '", Sv(m),
                       "' uses or makes a string that is not a token"));
    }
    // A repeated pair keeps its first (lowest) rank, like llama.cpp's emplace.
    merges_.try_emplace(BpeMergeKey(l, r), BpeMerge{static_cast<int32_t>(rank), result});
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::InitScores(const TokenizerVocab& vocab) {
  if (!vocab.scores.empty() && vocab.scores.size() != vocab.tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.ggml.scores has ", vocab.scores.size(),
                     " entries but tokenizer.ggml.tokens has ", vocab.tokens.size()));
  }
  scores_ = vocab.scores;
  scores_.resize(vocab.tokens.size(), 0.0f);  // llama.cpp scores a missing array as 0
  add_space_prefix_ = vocab.add_space_prefix;
  return absl::OkStatus();
}

absl::Status Tokenizer::InitSpecialIds(const TokenizerVocab& vocab) {
  const std::pair<const char*, int32_t> ids[] = {
      {"bos", vocab.bos_id},         {"eos", vocab.eos_id},         {"eot", vocab.eot_id},
      {"eom", vocab.eom_id},         {"fim_pad", vocab.fim_pad_id}, {"fim_rep", vocab.fim_rep_id},
      {"fim_sep", vocab.fim_sep_id}, {"unknown", vocab.unk_id},
  };
  for (const auto& [name, id] : ids) {
    if (id < -1 || id >= vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.ggml.", name, "_token_id = ", id,
                                                     " is outside the vocabulary of ",
                                                     vocab_size()));
    }
  }
  bos_id_ = vocab.bos_id;
  eos_id_ = vocab.eos_id;
  unk_id_ = vocab.unk_id;
  add_bos_ = vocab.add_bos;
  add_eos_ = vocab.add_eos;
  return absl::OkStatus();
}

void Tokenizer::InitByteMaps() {
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    AppendUtf8(ByteToSymbol(static_cast<uint8_t>(b)), &symbol);
    byte_token_[b] = FindToken(symbol);
    if (byte_token_[b] >= 0) continue;
    for (const char c : symbol) {
      const int32_t id = FindToken(std::string_view(&c, 1));
      if (id >= 0) byte_fallback_[b].push_back(id);
    }
  }
}

void Tokenizer::InitSpmByteTokens() {
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    int32_t id = FindToken(absl::StrFormat("<0x%02X>", b));
    if (id < 0) id = FindToken(std::string_view(&c, 1));
    // llama.cpp aborts here; the unknown token keeps the text representable.
    byte_token_[b] = id >= 0 ? id : unk_id_;
  }
}

void Tokenizer::InitEog(const TokenizerVocab& vocab) {
  std::vector<int32_t> eog = {vocab.eos_id, vocab.eom_id, vocab.fim_pad_id, vocab.fim_rep_id,
                              vocab.fim_sep_id};
  eog.push_back(vocab.eot_id >= 0 ? vocab.eot_id : FindToken(kDeepSeekEot));
  for (std::string_view text : kFimEogTexts) eog.push_back(FindToken(text));
  for (std::string_view text : kEogTexts) {
    const int32_t id = FindToken(text);
    if (id < 0) continue;
    eog.push_back(id);
    if (types_[id] != TokenType::kControl) {
      LOG(WARNING) << "end-of-generation token " << id << " '" << text
                   << "' is not CONTROL; treating it as CONTROL like llama.cpp";
      types_[id] = TokenType::kControl;
    }
  }
  eog.erase(std::remove(eog.begin(), eog.end(), -1), eog.end());
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  eog_ids_ = std::move(eog);
}

void Tokenizer::InitSpecialTokens() {
  for (int32_t id = 0; id < vocab_size(); ++id) {
    const TokenType t = types_[id];
    const bool special =
        t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown;
    if (special && !TokenText(id).empty()) special_tokens_.push_back(id);
  }
  // Longest first, so "<|im_start|>" wins over any special token it contains.
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [this](int32_t a, int32_t b) {
    return TokenText(a).size() > TokenText(b).size();
  });
}

void Tokenizer::InitDecodedBytes() {
  bytes_offsets_.reserve(types_.size() + 1);
  for (int32_t id = 0; id < vocab_size(); ++id) {
    bytes_offsets_.push_back(static_cast<uint32_t>(bytes_arena_.size()));
    switch (types_[id]) {
      case TokenType::kNormal:
        bytes_arena_ += spm_ ? UnescapeSpaces(TokenText(id)) : DecodeByteLevel(TokenText(id));
        break;
      case TokenType::kByte:
        if (spm_) bytes_arena_ += ByteTokenValue(TokenText(id));
        break;
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined:
        bytes_arena_ += TokenText(id);
        break;
      default:
        break;  // UNUSED and UNDEFINED (and gpt2 BYTE) render as nothing in llama.cpp
    }
  }
  bytes_offsets_.push_back(static_cast<uint32_t>(bytes_arena_.size()));
}

int32_t Tokenizer::FindToken(std::string_view text) const {
  const auto it = text_to_id_.find(text);
  return it == text_to_id_.end() ? -1 : it->second;
}

std::string_view Tokenizer::TokenText(int32_t id) const {
  if (!IsValidId(id)) return {};
  return std::string_view(text_arena_)
      .substr(text_offsets_[id], text_offsets_[id + 1] - text_offsets_[id]);
}

TokenType Tokenizer::GetTokenType(int32_t id) const {
  return IsValidId(id) ? types_[id] : TokenType::kUndefined;
}

bool Tokenizer::IsEog(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

std::string Tokenizer::TokenBytes(int32_t id, bool render_special) const {
  if (!IsValidId(id)) return {};
  const TokenType t = types_[id];
  if (!render_special && (t == TokenType::kControl || t == TokenType::kUnknown)) return {};
  return bytes_arena_.substr(bytes_offsets_[id], bytes_offsets_[id + 1] - bytes_offsets_[id]);
}

std::string Tokenizer::Decode(absl::Span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (const int32_t id : ids) out += TokenBytes(id, render_special);
  return out;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  std::vector<std::string_view> pieces;
  bool after_special = true;  // the start of the text counts as one (llama.cpp)
  for (const Fragment& f : SplitSpecial(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    if (spm_) {
      EncodeSpm(text.substr(f.begin, f.length), after_special, &out);
      after_special = false;
      continue;
    }
    pieces.clear();
    pre_tokenizer_.Split(text.substr(f.begin, f.length), &pieces);
    for (const std::string_view piece : pieces) EncodePiece(piece, &out);
  }
  return out;
}

std::vector<int32_t> Tokenizer::EncodePrompt(std::string_view text) const {
  std::vector<int32_t> ids;
  if (add_bos_ && bos_id_ >= 0) ids.push_back(bos_id_);
  const std::vector<int32_t> body = Encode(text, /*parse_special=*/true);
  ids.insert(ids.end(), body.begin(), body.end());
  if (add_eos_ && eos_id_ >= 0) ids.push_back(eos_id_);
  return ids;
}

// llama.cpp's tokenizer_st_partition: each special token in turn (longest
// first) cuts every remaining raw-text fragment at its occurrences.
std::vector<Tokenizer::Fragment> Tokenizer::SplitSpecial(std::string_view text,
                                                         bool parse_special) const {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (const int32_t id : special_tokens_) {
    const TokenType t = types_[id];
    if (!parse_special && (t == TokenType::kControl || t == TokenType::kUnknown)) continue;
    const std::string_view needle = TokenText(id);
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view hay = text.substr(f.begin, f.length);
      size_t pos = 0;
      for (size_t m = hay.find(needle); m != std::string_view::npos; m = hay.find(needle, pos)) {
        if (m > pos) next.push_back({-1, f.begin + pos, m - pos});
        next.push_back({id, f.begin + m, needle.size()});
        pos = m + needle.size();
      }
      if (pos < hay.size()) next.push_back({-1, f.begin + pos, hay.size() - pos});
    }
    frags.swap(next);
  }
  return frags;
}

void Tokenizer::EncodeSpm(std::string_view stretch, bool after_special,
                          std::vector<int32_t>* out) const {
  std::string escaped;
  escaped.reserve(stretch.size() + 8);
  if (add_space_prefix_ && after_special) escaped += kSpmSpace;
  for (const char c : stretch) {
    if (c == ' ') {
      escaped += kSpmSpace;
    } else {
      escaped.push_back(c);
    }
  }
  SpmMerger merger(text_to_id_, scores_, byte_token_, escaped);
  merger.Run();
  merger.Emit(out);
}

void Tokenizer::EncodePiece(std::string_view piece, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    std::string symbols;
    for (const char c : piece) AppendUtf8(ByteToSymbol(static_cast<uint8_t>(c)), &symbols);
    if (const int32_t id = FindToken(symbols); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  BpeMerger merger(merges_, byte_token_, piece);
  merger.Run();
  merger.Emit(byte_fallback_, out);
}

}  // namespace pdserve
