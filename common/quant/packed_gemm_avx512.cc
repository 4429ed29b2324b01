// AVX-512 VNNI many-token kernels over packed weights: one zmm holds one
// float (or int32) lane of the one-token kernel for 16 weight rows, and a
// token's four activation bytes are broadcast to all of them. A tile of
// tokens shares each unpacked weight vector; panels of tokens keep the
// activations a row group sweeps in L2. Compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512vnni; reached only after kernel_dispatch.cc's check.
//
// What is free and what is fixed (tests/unit/quant/packed_gemm_test.cc
// checks it bit for bit): the integer sums are exact in any order, so the
// lanes may be formed however is cheapest; each lane's float operations,
// the product of the scales and the final lane tree are the one-token
// kernel's (vec_dot_x86.inc), which follow llama.cpp's.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "common/quant/group_prefetch.h"
#include "common/quant/packed_gemm.h"
#include "common/quant/quant_blocks.h"

namespace pdserve::packed_avx512 {
namespace {

constexpr int kSlices = 8;  // 4-element slices (int32 lanes) per 32 elements
// Steps of up to this many tokens are decode-sized: SliceKernel takes them
// two tokens a pass (Pairs), the weights streaming from DRAM.
constexpr int64_t kDecodeTokens = 16;

inline int32_t Load4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline __m512i Bcast4(const void* p) { return _mm512_set1_epi32(Load4(p)); }
inline __m512i Load512(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline __m512 LoadF16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline void StoreRows(float* y, __m512 v, int valid) {
  if (valid >= kPackedRows) {
    _mm512_storeu_ps(y, v);
  } else {
    _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << valid) - 1), v);
  }
}

// Hsum()'s order, lane-wise: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
inline __m512 SumLanes(const __m512* l) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l[0], l[4]), _mm512_add_ps(l[2], l[6])),
                       _mm512_add_ps(_mm512_add_ps(l[1], l[5]), _mm512_add_ps(l[3], l[7])));
}

// ---- Q5_0 and Q8_0 x Q8_0: DotQ5_0Q8_0's and DotQ8_0Q8_0's order. Per
// block, d = d_w * d_a; lane p (elements 4p..4p+3) += d * float(int sum),
// in block order; then the lane tree. The weights are read unsigned, as
// w + bias (Q5_0: nibble | fifth bit << 4 = w + 16; Q8_0: w ^ 0x80 =
// w + 128), and each lane's int sum starts from -bias * (activation slice
// sum), a precomputed int32 broadcast from memory.
//
// Every lane costs a dpbusd, a convert and an FMA per block, so 8 lanes x
// tokens of float accumulators would not fit the register file with a
// useful tile of tokens (three tokens spilled). The lanes are independent
// chains, though: the kernel makes four passes over a chunk of blocks, one
// per pair of lanes (the low and high nibbles of one weight vector), with
// 2 x 8 tokens of accumulators in registers, the per-block d products
// precomputed in L1 and read as the FMA's memory operand. ----
// The weight vectors of one pair of lanes (g and g + 4) of a block, as
// unsigned bytes: Q5_0's nibbles with their fifth bits (w + 16).
struct Q5_0Weights {
  static constexpr int64_t kBlockBytes = kPackedQ5_0Block;
  static constexpr int64_t kD = kPackedQ5_0D;

  static void Lanes(const uint8_t* wb, int g, __m512i* lo, __m512i* hi) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i sixteen = _mm512_set1_epi8(16);
    uint64_t m_lo, m_hi;
    std::memcpy(&m_lo, wb + kPackedQ5_0Masks + 8 * g, 8);
    std::memcpy(&m_hi, wb + kPackedQ5_0Masks + 8 * (g + 4), 8);
    const __m512i v = Load512(wb + 64 * g);
    *lo = _mm512_and_si512(v, low4);
    *lo = _mm512_mask_add_epi8(*lo, _cvtu64_mask64(m_lo), *lo, sixteen);
    *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    *hi = _mm512_mask_add_epi8(*hi, _cvtu64_mask64(m_hi), *hi, sixteen);
  }
};

// Q8_0's signed bytes made unsigned (w ^ 0x80 = w + 128).
struct Q8_0Weights {
  static constexpr int64_t kBlockBytes = kPackedQ8_0Block;
  static constexpr int64_t kD = 512;

  static void Lanes(const uint8_t* wb, int g, __m512i* lo, __m512i* hi) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    *lo = _mm512_xor_si512(Load512(wb + 64 * g), flip);
    *hi = _mm512_xor_si512(Load512(wb + 64 * (g + 4)), flip);
  }
};

template <typename W>
struct SliceKernel {
  static constexpr int kTile = 8;
  static constexpr int64_t kBlockBytes = W::kBlockBytes;
  static constexpr int kChunk = 16;  // blocks per pass: d products and weights stay in L1
  // A tile's activations, interleaved: block b's record for token t at
  // (b * nt + t) * 64: its 32 int8 values, then its 8 slice-sum starts;
  // then every block's d, [b * nt + t]. One pointer and immediate offsets
  // then reach every token (per-token pointers spilled the GPRs).
  static constexpr int64_t kRecord = 64;

  static int64_t TileBytes(const PackedGemmArgs& a, int nt) {
    return a.n_blocks * nt * (kRecord + static_cast<int64_t>(sizeof(float)));
  }

  static void Interleave(const PackedGemmArgs& a, int64_t t0, int nt, uint8_t* tile) {
    float* d = reinterpret_cast<float*>(tile + a.n_blocks * nt * kRecord);
    for (int t = 0; t < nt; ++t) {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(a.act + (t0 + t) * a.act_stride);
      const int32_t* off = a.act_offsets + (t0 + t) * a.n_blocks * kSlices;
      for (int64_t b = 0; b < a.n_blocks; ++b) {
        uint8_t* rec = tile + (b * nt + t) * kRecord;
        std::memcpy(rec, blk[b].qs, 32);
        std::memcpy(rec + 32, off + b * kSlices, 32);
        d[b * nt + t] = a.act_d[(t0 + t) * a.n_blocks + b];
      }
    }
  }

  // One or two tokens of the tile (record `first` onwards, of `stride`
  // records a block): all eight lanes of each token in registers, one pass
  // over the group's blocks, the weights read in order. In the first token
  // tile (the one that streams the group from memory) it fetches share
  // `part` of `parts` of the next row group meanwhile (GroupPrefetch).
  template <int NT>
  static void OnePass(const uint8_t* w, const PackedGemmArgs& a, const uint8_t* tile, int stride,
                      int first, int64_t t0, float* y, int valid, int part, int parts) {
    const float* da = reinterpret_cast<const float*>(tile + a.n_blocks * stride * kRecord);
    const GroupPrefetch next(w, a.n_blocks, kBlockBytes, t0 == 0, parts);
    __m512 acc[NT][kSlices];
    for (int t = 0; t < NT; ++t) {
      for (int l = 0; l < kSlices; ++l) acc[t][l] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < a.n_blocks; ++b, w += kBlockBytes) {
      next.Fetch(b, part);
      const __m512 dw = LoadF16x16(w + W::kD);
      __m512 dd[NT];
      for (int t = 0; t < NT; ++t) {
        dd[t] = _mm512_mul_ps(dw, _mm512_set1_ps(da[b * stride + first + t]));
      }
      const uint8_t* rec = tile + (b * stride + first) * kRecord;
      for (int g = 0; g < 4; ++g) {
        __m512i lo, hi;
        W::Lanes(w, g, &lo, &hi);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* r = rec + t * kRecord;
          const __m512i s_lo = _mm512_dpbusd_epi32(Bcast4(r + 32 + 4 * g), lo, Bcast4(r + 4 * g));
          const __m512i s_hi =
              _mm512_dpbusd_epi32(Bcast4(r + 48 + 4 * g), hi, Bcast4(r + 16 + 4 * g));
          acc[t][g] = _mm512_fmadd_ps(dd[t], _mm512_cvtepi32_ps(s_lo), acc[t][g]);
          acc[t][g + 4] = _mm512_fmadd_ps(dd[t], _mm512_cvtepi32_ps(s_hi), acc[t][g + 4]);
        }
      }
    }
    for (int t = 0; t < NT; ++t) {
      StoreRows(y + (t0 + first + t) * a.ldy, SumLanes(acc[t]), valid);
    }
  }

  // A decode-sized step (up to kDecodeTokens): the tile's tokens two at a
  // time, each pair one pass over the group (the first from memory, the
  // rest from L1), together fetching the next group. Such a step reads
  // every weight once, from DRAM, and the chunked passes below, which
  // visit each block's lines in four strides, kept the core waiting on
  // memory instead: Q8_0 896x151936 at 8 tokens, 2 threads, went from 89
  // to 119 G MAC/s this way. With the weights in cache, as in a prompt's
  // later tiles, pairs cost 3-8% more than the chunked passes.
  template <int NT>
  static void Pairs(const uint8_t* w, const PackedGemmArgs& a, const uint8_t* tile, int64_t t0,
                    float* y, int valid) {
    constexpr int kParts = (NT + 1) / 2;
    for (int f = 0; f + 1 < NT; f += 2) {
      OnePass<2>(w, a, tile, NT, f, t0, y, valid, f / 2, kParts);
    }
    if constexpr (NT % 2 == 1) OnePass<1>(w, a, tile, NT, NT - 1, t0, y, valid, kParts - 1, kParts);
  }

  template <int NT>
  static void Tile(const uint8_t* w, const PackedGemmArgs& a, const uint8_t* tile, int64_t t0,
                   float* y, int valid) {
    if constexpr (NT <= 2) {
      OnePass<NT>(w, a, tile, NT, 0, t0, y, valid, 0, 1);
      return;
    }
    if (a.n_tokens <= kDecodeTokens) {
      Pairs<NT>(w, a, tile, t0, y, valid);
      return;
    }
    const float* da = reinterpret_cast<const float*>(tile + a.n_blocks * NT * kRecord);
    alignas(64) float lanes[NT][kSlices][kPackedRows] = {};
    alignas(64) float dd[kChunk][NT][kPackedRows];
    for (int64_t b0 = 0; b0 < a.n_blocks; b0 += kChunk) {
      const int nb = static_cast<int>(std::min<int64_t>(kChunk, a.n_blocks - b0));
      const uint8_t* wc = w + b0 * kBlockBytes;
      // The passes read each block's lines in four visits 64 x kChunk bytes
      // apart, which the hardware prefetchers do not follow: fetch the next
      // chunk (or the next group's first) whole while this one computes.
      // (A prefetch never faults.)
      for (int64_t at = 0; at < kChunk * kBlockBytes; at += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(wc + kChunk * kBlockBytes + at), _MM_HINT_T0);
      }
      for (int b = 0; b < nb; ++b) {
        const __m512 dw = LoadF16x16(wc + b * kBlockBytes + W::kD);
        for (int t = 0; t < NT; ++t) {
          _mm512_store_ps(dd[b][t], _mm512_mul_ps(dw, _mm512_set1_ps(da[(b0 + b) * NT + t])));
        }
      }
      const uint8_t* records = tile + b0 * NT * kRecord;
      for (int g = 0; g < 4; ++g) {
        __m512 lo_acc[NT], hi_acc[NT];
        for (int t = 0; t < NT; ++t) {
          lo_acc[t] = _mm512_load_ps(lanes[t][g]);
          hi_acc[t] = _mm512_load_ps(lanes[t][g + 4]);
        }
        for (int b = 0; b < nb; ++b) {
          __m512i lo, hi;
          W::Lanes(wc + b * kBlockBytes, g, &lo, &hi);
          const uint8_t* rec = records + b * NT * kRecord;
          for (int t = 0; t < NT; ++t) {
            const uint8_t* r = rec + t * kRecord;
            const __m512 d = _mm512_load_ps(dd[b][t]);
            const __m512i s_lo =
                _mm512_dpbusd_epi32(Bcast4(r + 32 + 4 * g), lo, Bcast4(r + 4 * g));
            const __m512i s_hi =
                _mm512_dpbusd_epi32(Bcast4(r + 48 + 4 * g), hi, Bcast4(r + 16 + 4 * g));
            lo_acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s_lo), lo_acc[t]);
            hi_acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s_hi), hi_acc[t]);
          }
        }
        for (int t = 0; t < NT; ++t) {
          _mm512_store_ps(lanes[t][g], lo_acc[t]);
          _mm512_store_ps(lanes[t][g + 4], hi_acc[t]);
        }
      }
    }
    for (int t = 0; t < NT; ++t) {
      __m512 l[kSlices];
      for (int i = 0; i < kSlices; ++i) l[i] = _mm512_load_ps(lanes[t][i]);
      StoreRows(y + (t0 + t) * a.ldy, SumLanes(l), valid);
    }
  }
};

// The K-quant kernels' tiles: the tokens' Q8_K blocks interleaved, block b
// of token t at (b * nt + t) * sizeof(BlockQ8_K).
struct Q8_KTile {
  static int64_t TileBytes(const PackedGemmArgs& a, int nt) {
    return a.n_blocks * nt * static_cast<int64_t>(sizeof(BlockQ8_K));
  }

  static void Interleave(const PackedGemmArgs& a, int64_t t0, int nt, uint8_t* tile) {
    auto* out = reinterpret_cast<BlockQ8_K*>(tile);
    for (int t = 0; t < nt; ++t) {
      const auto* blk = reinterpret_cast<const BlockQ8_K*>(a.act + (t0 + t) * a.act_stride);
      for (int64_t b = 0; b < a.n_blocks; ++b) out[b * nt + t] = blk[b];
    }
  }
};

// ---- Q4_K x Q8_K: DotQ4_KQ8_K's order (llama.cpp's 8x8 gemv). Per
// super-block, acc += float(sum_j sc_j * D_j) * (d_w * d_a) and
// accmin += float(sum_j m_j * (bsum_2j + bsum_2j+1)) * (dmin_w * d_a), one
// FMA each; the result is acc - accmin. All the rest is integer. ----
struct Q4_KKernel : Q8_KTile {
  static constexpr int kTile = 6;  // D, isum, acc, accmin per token: 24 zmm
  static constexpr int64_t kBlockBytes = kPackedQ4_KBlock;

  template <int NT>
  static void Tile(const uint8_t* w, const PackedGemmArgs& a, const uint8_t* tile, int64_t t0,
                   float* y, int valid) {
    const BlockQ8_K* blocks = reinterpret_cast<const BlockQ8_K*>(tile);
    __m512 acc[NT], accmin[NT];
    for (int t = 0; t < NT; ++t) acc[t] = accmin[t] = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const GroupPrefetch next(w, a.n_blocks, kBlockBytes, t0 == 0);
    for (int64_t b = 0; b < a.n_blocks; ++b, w += kBlockBytes) {
      next.Fetch(b);
      const BlockQ8_K* act = blocks + b * NT;
      __m512i isum[NT];
      for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j) {
        const uint8_t* vectors = w + (j / 2) * 8 * 64;
        __m512i d[NT];
        for (int t = 0; t < NT; ++t) d[t] = _mm512_setzero_si512();
        for (int s = 0; s < 8; ++s) {
          const __m512i v = Load512(vectors + 64 * s);
          const __m512i q =
              (j & 1) ? _mm512_and_si512(_mm512_srli_epi16(v, 4), low4) : _mm512_and_si512(v, low4);
          for (int t = 0; t < NT; ++t) {
            d[t] = _mm512_dpbusd_epi32(d[t], q, Bcast4(act[t].qs + 32 * j + 4 * s));
          }
        }
        const __m512i sc = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + kPackedQ4_KScales + 16 * j)));
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(d[t], sc));
      }
      __m512i msum[NT];
      for (int t = 0; t < NT; ++t) msum[t] = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j) {
        // (m_j, m_j) as int16 pairs against (bsum_2j, bsum_2j+1).
        const __m512i m = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + kPackedQ4_KMins + 16 * j)));
        const __m512i mm = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
        for (int t = 0; t < NT; ++t) {
          msum[t] = _mm512_dpwssd_epi32(msum[t], mm, Bcast4(act[t].bsums + 2 * j));
        }
      }
      const __m512 dw = LoadF16x16(w + kPackedQ4_KD);
      const __m512 dmin = LoadF16x16(w + kPackedQ4_KDmin);
      for (int t = 0; t < NT; ++t) {
        const __m512 da = _mm512_set1_ps(act[t].d);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dw, da), acc[t]);
        accmin[t] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum[t]), _mm512_mul_ps(dmin, da), accmin[t]);
      }
    }
    for (int t = 0; t < NT; ++t) {
      StoreRows(y + (t0 + t) * a.ldy, _mm512_sub_ps(acc[t], accmin[t]), valid);
    }
  }
};

// ---- Q6_K x Q8_K: DotQ6_KQ8_K's order (llama.cpp's AVX2 vec_dot). Eight
// int32 lanes per super-block, lane l = sum over the eight 32-value chunks c
// of sc[2c + (l >= 4)] * (elements 32c+4l..+3 . activations), less
// 32 * (bsum_2l * sc_2l + bsum_2l+1 * sc_2l+1); lane l += (d_a * d_w) *
// float(lane), per super-block; then the lane tree. The 6-bit values are
// stored as bytes, so a product is one maddubs (no saturation: 2 * 63 *
// 128 < 2^15) and one dpwssd by (sc, sc). ----
struct Q6_KKernel : Q8_KTile {
  static constexpr int kTile = 3;  // 24 int lanes; float lanes live in L1
  static constexpr int64_t kBlockBytes = kPackedQ6_KBlock;

  template <int NT>
  static void Tile(const uint8_t* w, const PackedGemmArgs& a, const uint8_t* tile, int64_t t0,
                   float* y, int valid) {
    const BlockQ8_K* blocks = reinterpret_cast<const BlockQ8_K*>(tile);
    alignas(64) float lanes[NT][kSlices][kPackedRows] = {};
    // Within each dword (sc_a, sc_b) as int16: (sc_a, sc_a) and (sc_b, sc_b).
    const __m512i dup_a = _mm512_set_epi64(0x0D0C0D0C09080908, 0x0504050401000100,
                                           0x0D0C0D0C09080908, 0x0504050401000100,
                                           0x0D0C0D0C09080908, 0x0504050401000100,
                                           0x0D0C0D0C09080908, 0x0504050401000100);
    const __m512i dup_b = _mm512_set_epi64(0x0F0E0F0E0B0A0B0A, 0x0706070603020302,
                                           0x0F0E0F0E0B0A0B0A, 0x0706070603020302,
                                           0x0F0E0F0E0B0A0B0A, 0x0706070603020302,
                                           0x0F0E0F0E0B0A0B0A, 0x0706070603020302);
    const GroupPrefetch next(w, a.n_blocks, kBlockBytes, t0 == 0);
    for (int64_t b = 0; b < a.n_blocks; ++b, w += kBlockBytes) {
      next.Fetch(b);
      const BlockQ8_K* act = blocks + b * NT;
      auto scale_pairs = [&](int l) {
        return _mm512_cvtepi8_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + kPackedQ6_KScales + 32 * l)));
      };
      __m512i s[NT][kSlices];
      // Lane l starts at -32 * (bsum_2l * sc_2l + bsum_2l+1 * sc_2l+1).
      for (int l = 0; l < kSlices; ++l) {
        const __m512i neg = _mm512_sub_epi16(_mm512_setzero_si512(), scale_pairs(l));
        for (int t = 0; t < NT; ++t) {
          s[t][l] = _mm512_slli_epi32(
              _mm512_dpwssd_epi32(_mm512_setzero_si512(), neg, Bcast4(act[t].bsums + 2 * l)), 5);
        }
      }
      for (int c = 0; c < 8; ++c) {
        const __m512i pairs = scale_pairs(c);
        const __m512i sc_lo = _mm512_shuffle_epi8(pairs, dup_a);
        const __m512i sc_hi = _mm512_shuffle_epi8(pairs, dup_b);
        for (int l = 0; l < kSlices; ++l) {
          const __m512i q = Load512(w + (8 * c + l) * 64);
          const __m512i sc = l < 4 ? sc_lo : sc_hi;
          for (int t = 0; t < NT; ++t) {
            const __m512i p =
                _mm512_maddubs_epi16(q, Bcast4(act[t].qs + 32 * c + 4 * l));
            s[t][l] = _mm512_dpwssd_epi32(s[t][l], p, sc);
          }
        }
      }
      const __m512 dw = LoadF16x16(w + kPackedQ6_KD);
      for (int t = 0; t < NT; ++t) {
        const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(act[t].d), dw);
        for (int l = 0; l < kSlices; ++l) {
          const __m512 prev = _mm512_load_ps(lanes[t][l]);
          _mm512_store_ps(lanes[t][l], _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(s[t][l]), prev));
        }
      }
    }
    for (int t = 0; t < NT; ++t) {
      __m512 l[kSlices];
      for (int i = 0; i < kSlices; ++i) l[i] = _mm512_load_ps(lanes[t][i]);
      StoreRows(y + (t0 + t) * a.ldy, SumLanes(l), valid);
    }
  }
};

// The last n < K::kTile tokens, one tile.
template <typename K, int N = K::kTile - 1>
void TailTile(int n, const uint8_t* w, const PackedGemmArgs& a, const uint8_t* tile, int64_t t0,
              float* y, int valid) {
  if constexpr (N > 0) {
    if (n == N) {
      K::template Tile<N>(w, a, tile, t0, y, valid);
    } else {
      TailTile<K, N - 1>(n, w, a, tile, t0, y, valid);
    }
  }
}

// Row-group panels outer, token tiles, then the panel's row groups: a
// tile's activations, interleaved once per panel, stay in L1 while the
// panel's weights, sized for L2, stream past them in whole cache lines.
// (Tokens outer and groups inner had every 4-byte activation broadcast
// miss L1.)
template <typename K>
void Run(const PackedGemmArgs& a) {
  thread_local std::vector<uint8_t> tile;
  tile.resize(static_cast<size_t>(K::TileBytes(a, K::kTile)));
  const int64_t group_bytes = a.n_blocks * K::kBlockBytes;
  const int64_t panel_groups = std::max<int64_t>(1, PackedPanelWeightBytes() / group_bytes);
  for (int64_t g0 = 0; g0 < a.n_groups; g0 += panel_groups) {
    const int64_t g1 = std::min(a.n_groups, g0 + panel_groups);
    for (int64_t t = 0; t < a.n_tokens; t += K::kTile) {
      const int nt = static_cast<int>(std::min<int64_t>(K::kTile, a.n_tokens - t));
      K::Interleave(a, t, nt, tile.data());
      for (int64_t g = g0; g < g1; ++g) {
        const uint8_t* w = a.w + g * group_bytes;
        const int valid =
            static_cast<int>(std::min<int64_t>(kPackedRows, a.n_rows - g * kPackedRows));
        float* y = a.y + g * kPackedRows;
        if (nt == K::kTile) {
          K::template Tile<K::kTile>(w, a, tile.data(), t, y, valid);
        } else {
          TailTile<K>(nt, w, a, tile.data(), t, y, valid);
        }
      }
    }
  }
}

}  // namespace

void GemmQ5_0(const PackedGemmArgs& a) { Run<SliceKernel<Q5_0Weights>>(a); }
void GemmQ8_0(const PackedGemmArgs& a) { Run<SliceKernel<Q8_0Weights>>(a); }
void GemmQ4_K(const PackedGemmArgs& a) { Run<Q4_KKernel>(a); }
void GemmQ6_K(const PackedGemmArgs& a) { Run<Q6_KKernel>(a); }

}  // namespace pdserve::packed_avx512
