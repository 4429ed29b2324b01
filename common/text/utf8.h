// Strict UTF-8 decoding shared by the pre-tokenizer and the streaming
// detokenizer. Header-only: pure functions, thread-safe.
//
// "Strict" means what the Unicode standard calls well-formed: shortest form
// only, no surrogates, nothing above U+10FFFF. Ill-formed input is reported
// per "maximal subpart" (Unicode §3.9, the practice Python and browsers use
// when they substitute U+FFFD), so callers replace or classify it the same
// way everywhere.
#ifndef PDSERVE_COMMON_TEXT_UTF8_H_
#define PDSERVE_COMMON_TEXT_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pdserve {

enum class Utf8Status : uint8_t {
  kOk,         // `length` bytes decode to `cp`
  kInvalid,    // `length` (>= 1) bytes form one ill-formed maximal subpart
  kTruncated,  // all `length` remaining bytes are a valid but unfinished prefix
};

struct Utf8Char {
  Utf8Status status;
  int length;
  char32_t cp;  // meaningful only for kOk
};

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

namespace utf8_internal {

// Allowed range of the second byte for each lead byte (Unicode Table 3-7);
// the tighter ranges are what exclude overlongs, surrogates and > U+10FFFF.
inline bool SecondByteOk(uint8_t lead, uint8_t b) {
  if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
  if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
  if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  return b >= 0x80 && b <= 0xBF;
}

inline int SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // continuation byte, C0/C1 or F5..FF: never a valid lead
}

}  // namespace utf8_internal

// Decodes the character starting at s[pos] (pos < s.size()).
inline Utf8Char DecodeUtf8(std::string_view s, size_t pos) {
  const auto lead = static_cast<uint8_t>(s[pos]);
  const int need = utf8_internal::SequenceLength(lead);
  if (need == 1) return {Utf8Status::kOk, 1, lead};
  if (need == 0) return {Utf8Status::kInvalid, 1, 0};
  char32_t cp = lead & (0x7F >> need);
  for (int i = 1; i < need; ++i) {
    if (pos + i >= s.size()) return {Utf8Status::kTruncated, i, 0};
    const auto b = static_cast<uint8_t>(s[pos + i]);
    const bool ok = i == 1 ? utf8_internal::SecondByteOk(lead, b) : (b & 0xC0) == 0x80;
    if (!ok) return {Utf8Status::kInvalid, i, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Utf8Status::kOk, need, cp};
}

// Appends `cp` (must be <= U+10FFFF) as UTF-8.
inline void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace pdserve

#endif  // PDSERVE_COMMON_TEXT_UTF8_H_
