#include "tools/bench/kernel_bench.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/cpu/matmul.h"
#include "common/cpu/packed_weights.h"
#include "common/model/model_weights.h"
#include "common/gguf/ggml_type.h"
#include "common/quant/half.h"

namespace pdserve {
namespace {

struct Shape {
  GgmlType type;
  int64_t in, out;
  const char* where;
};

// The matrices that carry the three models' prompt work.
constexpr Shape kShapes[] = {
    {GgmlType::kQ5_0, 896, 4864, "Qwen ffn_gate/up"},
    {GgmlType::kQ4_K, 4864, 896, "Qwen ffn_down"},
    {GgmlType::kQ6_K, 4864, 896, "Qwen ffn_down"},
    {GgmlType::kQ5_0, 640, 2048, "Gemma ffn_gate/up"},
    {GgmlType::kQ8_0, 896, 128, "Qwen attn_v"},
    {GgmlType::kQ8_0, 896, 151936, "Qwen output"},
    {GgmlType::kQ4_1, 576, 1536, "SmolLM2 ffn_gate/up"},
};

// Random quantised bytes; every f16 field set to a small scale so that no
// value is Inf or NaN (the bytes of the K-quants' packed 6-bit fields are
// valid whatever they are).
std::vector<uint8_t> RandomWeights(const WeightMatrix& w, std::mt19937_64& rng) {
  std::vector<uint8_t> bytes(static_cast<size_t>(w.row_bytes * w.out));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng() & 0x3F);  // f16 bits stay small
  const uint16_t scale = F32ToF16(0.01f);
  const int64_t block = FindGgmlTypeTraits(w.type)->block_bytes;
  for (int64_t at = 0; at + block <= static_cast<int64_t>(bytes.size()); at += block) {
    // d (and m/dmin) lead the block except in Q6_K, where d ends it.
    uint8_t* blk = bytes.data() + at;
    if (w.type == static_cast<uint32_t>(GgmlType::kQ6_K)) blk += block - 2;
    std::copy_n(reinterpret_cast<const uint8_t*>(&scale), 2, blk);
  }
  return bytes;
}

double BestSeconds(Matmul& matmul, const MatmulJob& job, const std::vector<float>& x,
                   int64_t tokens) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    matmul.Run({&job, 1}, x.data(), tokens);
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

std::vector<KernelRate> MeasureKernels(ThreadPool* pool, const std::vector<int64_t>& token_counts) {
  std::vector<KernelRate> rates;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const Shape& s : kShapes) {
    WeightMatrix w;
    w.type = static_cast<uint32_t>(s.type);
    w.in = s.in;
    w.out = s.out;
    w.row_bytes = GgmlRowBytes(w.type, s.in);
    const std::vector<uint8_t> bytes = RandomWeights(w, rng);
    w.data = bytes.data();
    const PackedMatrix packed = PackedMatrix::Pack(w);
    Matmul matmul(pool);
    for (int64_t tokens : token_counts) {
      std::vector<float> x(static_cast<size_t>(tokens * s.in));
      for (float& v : x) v = dist(rng);
      std::vector<float> y(static_cast<size_t>(tokens * s.out));
      const MatmulJob job{&w, y.data(), &packed};
      const double seconds = BestSeconds(matmul, job, x, tokens);
      rates.push_back(
          {absl::StrCat(GgmlTypeName(w.type), " ", s.in, "x", s.out, " (", s.where, ")"), tokens,
           static_cast<double>(s.in) * s.out * tokens / seconds, s.type != GgmlType::kQ4_K});
    }
  }
  return rates;
}

}  // namespace pdserve
