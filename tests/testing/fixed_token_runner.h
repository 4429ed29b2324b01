// Test helper: a runner whose logits always favour one token, to drive the
// engine's end-of-generation, window and memory paths deterministically
// and fast. It keeps the ModelRunner contract: the batch is validated and
// every chunk with want_logits gets logit_rows rows. With `write_kv`, every
// layer's K/V rows of each computed position are written (so their pages
// become resident, as a real runner's would).
#ifndef PDSERVE_TESTS_TESTING_FIXED_TOKEN_RUNNER_H_
#define PDSERVE_TESTS_TESTING_FIXED_TOKEN_RUNNER_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "common/engine/model_runner.h"

namespace pdserve::test {

class FixedTokenRunner : public ModelRunner {
 public:
  FixedTokenRunner(const ModelConfig& c, int32_t token, bool write_kv = false)
      : config_(c), token_(token), write_kv_(write_kv) {}
  const ModelConfig& config() const override { return config_; }
  absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                       std::vector<float>* logits) override {
    if (absl::Status s = ValidateBatch(batch, config_, cache); !s.ok()) return s;
    logits->clear();
    for (const SequenceChunk& ch : batch.chunks) {
      if (write_kv_) WriteKv(ch, cache);
      if (!ch.want_logits) continue;
      for (int32_t r = 0; r < ch.logit_rows; ++r) {
        const size_t row = logits->size();
        logits->resize(row + config_.n_vocab, 0.0f);
        (*logits)[row + token_] = 10.0f;
      }
    }
    return absl::OkStatus();
  }

 private:
  void WriteKv(const SequenceChunk& ch, KvCache& cache) const {
    const int32_t block_size = cache.layout().block_size;
    const int64_t row_bytes = cache.layout().row_bytes();
    for (size_t i = 0; i < ch.tokens.size(); ++i) {
      const int32_t pos = ch.start_pos + static_cast<int32_t>(i);
      const int32_t block = ch.block_table[pos / block_size];
      for (int l = 0; l < config_.n_layers; ++l) {
        uint8_t* k = cache.LayerBlock(l, block) + (pos % block_size) * row_bytes;
        std::memset(k, 1, row_bytes);
        std::memset(k + block_size * row_bytes, 1, row_bytes);
      }
    }
  }

  ModelConfig config_;
  int32_t token_;
  bool write_kv_;
};

}  // namespace pdserve::test

#endif  // PDSERVE_TESTS_TESTING_FIXED_TOKEN_RUNNER_H_
