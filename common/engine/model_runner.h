// ModelRunner: the interface every forward-pass implementation (CPU here,
// CUDA in common/gpu/cuda/) provides to the workers' engine loops.
//
// A forward step is "ragged": it mixes prefill chunks and single decode
// tokens of many sequences. Each chunk brings its own block table into the
// KV cache; K/V of every input token are written there, and logits are
// returned only for the chunks that ask (normally their last token).
//
// Not thread-safe: one engine thread drives a runner.
#ifndef PDSERVE_COMMON_ENGINE_MODEL_RUNNER_H_
#define PDSERVE_COMMON_ENGINE_MODEL_RUNNER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/engine/kv_cache.h"
#include "common/model/model_config.h"

namespace pdserve {

struct SequenceChunk {
  absl::Span<const int32_t> tokens;       // input tokens of this step
  int32_t start_pos = 0;                  // position of tokens[0]
  absl::Span<const int32_t> block_table;  // covers start_pos + tokens.size()
  bool want_logits = false;               // logits for the last token
  // With want_logits: logits for the last `logit_rows` tokens, one row
  // each (a speculative draft's verification needs every position's).
  int32_t logit_rows = 1;
};

struct ForwardBatch {
  std::vector<SequenceChunk> chunks;
  // Called after layer l's K/V for every token of the batch are in the
  // cache, before the rest of that layer runs: prefill workers start
  // sending that layer while the next ones compute.
  std::function<void(int layer)> on_layer_done;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelConfig& config() const = 0;
  // Runs the batch. `logits` receives logit_rows rows of n_vocab floats per
  // chunk with want_logits, in chunk and token order. Invalid input (token id out of range,
  // position past the context, short block table) is INVALID_ARGUMENT /
  // OUT_OF_RANGE and leaves the cache untouched.
  virtual absl::Status Forward(const ForwardBatch& batch, KvCache& cache,
                               std::vector<float>* logits) = 0;
  // OK while the runner can serve. A device runner whose device failed for
  // good returns that error here, and the worker's health turns NOT_SERVING.
  virtual absl::Status Healthy() const { return absl::OkStatus(); }
};

// Checks a batch against the model and cache before anything is written.
absl::Status ValidateBatch(const ForwardBatch& batch, const ModelConfig& config,
                           const KvCache& cache);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_MODEL_RUNNER_H_
