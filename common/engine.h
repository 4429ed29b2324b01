// Engine: continuous batching over one ModelRunner and one KvCache.
//
// Each Step() builds one ragged forward batch: every running sequence
// contributes its next decode token, and the remaining token budget
// (max_batch_tokens) is filled with prefill chunks of sequences still
// reading their prompt, oldest first. New sequences join between steps and
// finished ones leave, so decode never waits for a whole batch to drain.
//
// A sequence's KV blocks (prompt + max_tokens, capped by the context) are
// reserved when it is added, so an admitted sequence can always finish;
// admission fails with RESOURCE_EXHAUSTED instead.
//
// Not thread-safe: a worker drives its Engine from one engine thread.
#ifndef PDSERVE_COMMON_ENGINE_H_
#define PDSERVE_COMMON_ENGINE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kv_cache.h"
#include "common/model_runner.h"
#include "common/sequence.h"
#include "common/tokenizer.h"

namespace pdserve {

class Engine {
 public:
  struct Options {
    int32_t max_batch_tokens = 512;  // tokens per forward step
    int32_t max_running = 64;        // sequences in the batch at once
  };

  Engine(const Tokenizer* tokenizer, ModelRunner* runner, KvCache* cache, Options options);
  ~Engine();

  // Validates and admits a sequence; events arrive from Step() calls.
  absl::StatusOr<int64_t> Add(SequenceOptions options,
                              std::function<void(const TokenEvent&)> on_event);
  // Ends a sequence now (its callback sees kCancelled) and frees its blocks.
  // Unknown ids are ignored: the sequence may just have finished.
  void Cancel(int64_t seq_id);

  bool HasWork() const { return !sequences_.empty(); }
  int32_t num_running() const;
  int32_t num_waiting() const;
  // Runs one forward step over the current batch.
  absl::Status Step();

 private:
  void BuildBatch(ForwardBatch* batch, std::vector<Sequence*>* owners);
  void SampleNext(Sequence& seq, absl::Span<float> logits);
  void Finish(Sequence& seq, FinishReason reason);
  void ReapFinished();

  const Tokenizer* tokenizer_;
  ModelRunner* runner_;
  KvCache* cache_;
  const Options options_;
  int64_t next_id_ = 1;
  std::map<int64_t, std::unique_ptr<Sequence>> sequences_;  // admission order
  std::vector<float> logits_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_H_
