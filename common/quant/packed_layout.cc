#include "common/quant/packed_layout.h"

#include <cstring>

#include "common/gguf/ggml_type.h"
#include "common/quant/quant_blocks.h"

namespace pdserve {
namespace {

// Row r's four bytes `src` into slice vector `v` of a packed block.
void PutSlice(uint8_t* block, int v, int r, const void* src) {
  std::memcpy(block + (v * kPackedRows + r) * 4, src, 4);
}

void PutF16(uint8_t* block, int64_t offset, int r, uint16_t h) {
  std::memcpy(block + offset + 2 * r, &h, 2);
}

void PackQ4_1(const uint8_t* row, int r, int64_t b, uint8_t* dst) {
  const auto& x = reinterpret_cast<const BlockQ4_1*>(row)[b];
  for (int g = 0; g < 4; ++g) PutSlice(dst, g, r, x.qs + 4 * g);
  PutF16(dst, 256, r, x.d);
  PutF16(dst, 288, r, x.m);
}

void PackQ8_0(const uint8_t* row, int r, int64_t b, uint8_t* dst) {
  const auto& x = reinterpret_cast<const BlockQ8_0*>(row)[b];
  for (int g = 0; g < 8; ++g) PutSlice(dst, g, r, x.qs + 4 * g);
  PutF16(dst, 512, r, x.d);
}

void PackQ5_0(const uint8_t* row, int r, int64_t b, uint8_t* dst) {
  const auto& x = reinterpret_cast<const BlockQ5_0*>(row)[b];
  for (int g = 0; g < 4; ++g) PutSlice(dst, g, r, x.qs + 4 * g);
  uint32_t qh;
  std::memcpy(&qh, x.qh, 4);
  for (int s = 0; s < 8; ++s) {
    // Slice s holds elements 4s..4s+3: their fifth bits are qh bits 4s..4s+3.
    uint64_t mask;
    std::memcpy(&mask, dst + kPackedQ5_0Masks + 8 * s, 8);
    mask |= static_cast<uint64_t>((qh >> (4 * s)) & 0xF) << (4 * r);
    std::memcpy(dst + kPackedQ5_0Masks + 8 * s, &mask, 8);
  }
  PutF16(dst, kPackedQ5_0D, r, x.d);
}

// Sub-block j's 6-bit scale and min (ggml's get_scale_min_k4).
void KScaleMin(const uint8_t* q, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void PackQ4_K(const uint8_t* row, int r, int64_t b, uint8_t* dst) {
  const auto& x = reinterpret_cast<const BlockQ4_K*>(row)[b];
  for (int v = 0; v < 32; ++v) PutSlice(dst, v, r, x.qs + 4 * v);
  for (int j = 0; j < 8; ++j) {
    KScaleMin(x.scales, j, dst + kPackedQ4_KScales + j * kPackedRows + r,
              dst + kPackedQ4_KMins + j * kPackedRows + r);
  }
  PutF16(dst, kPackedQ4_KD, r, x.d);
  PutF16(dst, kPackedQ4_KDmin, r, x.dmin);
}

// Element i of a Q6_K super-block as its unsigned 6-bit value (ggml's
// dequantize_row_q6_K: per 128 elements, ql holds the low nibbles of 32-value
// chunks 0, 1 then their high nibbles for chunks 2, 3; qh bit pair k of
// byte l is chunk k's).
uint8_t Q6Value(const BlockQ6_K& x, int i) {
  const int h = i / 128, k = (i % 128) / 32, l = i % 32;
  const uint8_t ql = x.ql[64 * h + 32 * (k & 1) + l];
  const uint8_t low = (k < 2) ? (ql & 0xF) : (ql >> 4);
  return static_cast<uint8_t>(low | (((x.qh[32 * h + l] >> (2 * k)) & 3) << 4));
}

void PackQ6_K(const uint8_t* row, int r, int64_t b, uint8_t* dst) {
  const auto& x = reinterpret_cast<const BlockQ6_K*>(row)[b];
  for (int v = 0; v < 64; ++v) {
    uint8_t q[4];
    for (int j = 0; j < 4; ++j) q[j] = Q6Value(x, 4 * v + j);
    PutSlice(dst, v, r, q);
  }
  for (int l = 0; l < 8; ++l) {
    uint8_t* pair = dst + kPackedQ6_KScales + (l * kPackedRows + r) * 2;
    std::memcpy(pair, x.scales + 2 * l, 2);
  }
  PutF16(dst, kPackedQ6_KD, r, x.d);
}

// Every packed type: its layout and its packer.
struct PackedType {
  GgmlType type;
  PackedLayout layout;
  void (*pack)(const uint8_t* row, int r, int64_t b, uint8_t* dst);
};

constexpr PackedType kPackedTypes[] = {
    {GgmlType::kQ4_1, {kPackedQ4_1Block, kQK}, PackQ4_1},
    {GgmlType::kQ8_0, {kPackedQ8_0Block, kQK}, PackQ8_0},
    {GgmlType::kQ5_0, {kPackedQ5_0Block, kQK}, PackQ5_0},
    {GgmlType::kQ4_K, {kPackedQ4_KBlock, kQKK}, PackQ4_K},
    {GgmlType::kQ6_K, {kPackedQ6_KBlock, kQKK}, PackQ6_K},
};

const PackedType* FindPackedType(uint32_t type) {
  for (const PackedType& p : kPackedTypes) {
    if (static_cast<uint32_t>(p.type) == type) return &p;
  }
  return nullptr;
}

}  // namespace

PackedLayout PackedLayoutOf(uint32_t type) {
  const PackedType* p = FindPackedType(type);
  return p != nullptr ? p->layout : PackedLayout{0, 0};
}

void PackBlock(uint32_t type, const uint8_t* const* rows, int64_t b, uint8_t* dst) {
  const PackedType* p = FindPackedType(type);
  if (p == nullptr) return;
  for (int r = 0; r < kPackedRows; ++r) {
    if (rows[r] != nullptr) p->pack(rows[r], r, b, dst);
  }
}

}  // namespace pdserve
