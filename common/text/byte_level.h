// GPT-2's byte-level alphabet: a bijection between the 256 byte values and
// 256 printable code points, so every byte string has a visible spelling
// that BPE vocabularies and merge lists are written in. Printable Latin-1
// bytes (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF) stand for themselves; the other
// 68 bytes map, in increasing order, to U+0100..U+0143 (so ' ' is U+0120
// 'Ġ' and '\n' is U+010A 'Ċ'). Header-only pure functions; thread-safe.
#ifndef PDSERVE_COMMON_TEXT_BYTE_LEVEL_H_
#define PDSERVE_COMMON_TEXT_BYTE_LEVEL_H_

#include <array>
#include <cstdint>

namespace pdserve {
namespace byte_level_internal {

constexpr bool IsSelfMapped(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<char32_t, 256> MakeByteToSymbol() {
  std::array<char32_t, 256> map{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) map[b] = IsSelfMapped(b) ? char32_t(b) : next++;
  return map;
}

inline constexpr std::array<char32_t, 256> kByteToSymbol = MakeByteToSymbol();
inline constexpr char32_t kSymbolLimit = 0x144;  // one past the largest symbol

constexpr std::array<int16_t, kSymbolLimit> MakeSymbolToByte() {
  std::array<int16_t, kSymbolLimit> map{};
  for (auto& v : map) v = -1;
  for (int b = 0; b < 256; ++b) map[kByteToSymbol[b]] = static_cast<int16_t>(b);
  return map;
}

inline constexpr std::array<int16_t, kSymbolLimit> kSymbolToByte = MakeSymbolToByte();

}  // namespace byte_level_internal

// The code point that spells byte `b`.
constexpr char32_t ByteToSymbol(uint8_t b) { return byte_level_internal::kByteToSymbol[b]; }

// The byte a code point spells, or -1 if it is not in the alphabet.
constexpr int SymbolToByte(char32_t cp) {
  return cp < byte_level_internal::kSymbolLimit ? byte_level_internal::kSymbolToByte[cp] : -1;
}

}  // namespace pdserve

#endif  // PDSERVE_COMMON_TEXT_BYTE_LEVEL_H_
