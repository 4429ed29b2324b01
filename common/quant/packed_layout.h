// The packed (row-interleaved) weight layouts that the many-token kernels
// read: kPackedRows consecutive output rows stored block by block so that
// one SIMD integer dot product computes a 4-element slice of every row at
// once, with the token's four activation bytes broadcast to all rows.
//
// Values are only moved (and, for Q6_K, their two bit planes joined), never
// re-rounded, so a packed kernel computes the same integer block sums as the
// one-token vec_dot kernel, and it keeps that kernel's float order per row.
//
// Per row group, the blocks (32 elements, or 256 for K-quants) follow each
// other. Inside one block, for slice vector v, row r and byte j, a 64-byte
// vector holds row r's bytes at 4r + j. The layouts:
//   Q4_1 (320 bytes): 4 vectors, vector g = qs[4g..4g+3] (low nibbles are
//     elements 4g+j, high nibbles 16+4g+j); d[16], m[16] (f16).
//   Q8_0 (544 bytes): 8 vectors, vector g = qs[4g..4g+3]; d[16] (f16).
//   Q5_0 (352 bytes): 4 nibble vectors as Q4_1; then 8 64-bit fifth-bit
//     masks, mask s bit 4r+j = qh bit 4s+j of row r (slice s < 4: the low
//     nibbles of vector s, else the high nibbles of vector s-4); d[16] (f16).
//     Weights are read as unsigned w+16.
//   Q4_K (2368 bytes per super-block): 32 vectors, vector 8c+s = qs[32c+4s
//     ..+3] (low nibbles: sub-block 2c, high: 2c+1); scales u8 [j*16+r];
//     mins u8 [j*16+r]; d[16], dmin[16] (f16).
//   Q6_K (4416 bytes per super-block): 64 vectors of the 6-bit values as
//     bytes (0..63), vector 8c+l = elements 32c+4l..+3; then scale pairs
//     i8 [(l*16+r)*2 + {0,1}] = scales[2l], scales[2l+1]; d[16] (f16);
//     32 bytes of padding (64-byte blocks).
// Rows past the end of the matrix are zero (their outputs are not stored).
#ifndef PDSERVE_COMMON_QUANT_PACKED_LAYOUT_H_
#define PDSERVE_COMMON_QUANT_PACKED_LAYOUT_H_

#include <cstdint>

namespace pdserve {

inline constexpr int kPackedRows = 16;

// Bytes of one packed block of kPackedRows rows.
inline constexpr int64_t kPackedQ4_1Block = kPackedRows * 20;
inline constexpr int64_t kPackedQ8_0Block = kPackedRows * 34;
inline constexpr int64_t kPackedQ5_0Block = kPackedRows * 22;
inline constexpr int64_t kPackedQ4_KBlock = 2368;
inline constexpr int64_t kPackedQ6_KBlock = 4416;

// Byte offsets inside a packed block.
inline constexpr int64_t kPackedQ5_0Masks = 256;
inline constexpr int64_t kPackedQ5_0D = 320;
inline constexpr int64_t kPackedQ4_KScales = 2048;
inline constexpr int64_t kPackedQ4_KMins = 2176;
inline constexpr int64_t kPackedQ4_KD = 2304;
inline constexpr int64_t kPackedQ4_KDmin = 2336;
inline constexpr int64_t kPackedQ6_KScales = 4096;
inline constexpr int64_t kPackedQ6_KD = 4352;

// The packed layout of a weight type: block bytes and elements per block;
// {0, 0} when the type has none.
struct PackedLayout {
  int64_t block_bytes;
  int64_t block_elems;
};
PackedLayout PackedLayoutOf(uint32_t type);

// Writes block `b` of the kPackedRows rows `rows` (null past the matrix's
// end) into `dst` (zeroed, block_bytes long). Rows are in the GGUF format.
void PackBlock(uint32_t type, const uint8_t* const* rows, int64_t b, uint8_t* dst);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_QUANT_PACKED_LAYOUT_H_
