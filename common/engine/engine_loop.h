// EngineLoop: the one engine thread of a worker. It owns the Engine (and
// through it the scheduler, block allocator and model runner); other threads
// (gRPC reactions, KV transport I/O) talk to it only by posting closures,
// which run on the engine thread between forward steps.
//
// A load snapshot (free blocks, running, waiting, queued prompt tokens) is
// published after every step for GetLoad/WatchLoad on other threads.
//
// Thread-safety: Post(), load() and Stop() are safe from any thread.
#ifndef PDSERVE_COMMON_ENGINE_ENGINE_LOOP_H_
#define PDSERVE_COMMON_ENGINE_ENGINE_LOOP_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"

namespace pdserve {

struct EngineLoad {
  int32_t kv_blocks_total = 0;
  // Blocks an admission can take: empty, or cached and unreferenced
  // (reclaimable, evicted on demand).
  int32_t kv_blocks_free = 0;
  // Of the free blocks, those still holding a cached prefix.
  int32_t kv_blocks_cached = 0;
  // Cumulative prefix-cache lookups and hits, in prompt tokens.
  int64_t prefix_lookup_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  // Cumulative speculative-decoding counters (speculation.h).
  SpeculationStats speculation;
  // Cumulative grammar masks (structured output) and their time.
  Engine::GrammarStats grammar;
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t paused = 0;  // sequences held out of the batch by back pressure
  int64_t queued_prompt_tokens = 0;
  int64_t steps = 0;
  // Prompt tokens prefilled per second of step time, a moving average over
  // steps that prefilled at least kMinRateSampleTokens; 0 until measured.
  double prefill_tokens_per_s = 0;
  // LoadReport.cached_block_keys: up to kMaxPublishedBlockKeys keys of
  // cached blocks, sorted. Shared, because load() is copied for every
  // report and scrape while the keys change only with the cache.
  std::shared_ptr<const std::vector<uint64_t>> cached_block_keys;
};

// Bound of the published key summary: 4 KiB per load report.
inline constexpr int32_t kMaxPublishedBlockKeys = 512;
// Steps that prefill fewer tokens say little about the prefill rate.
inline constexpr int64_t kMinRateSampleTokens = 16;

class EngineLoop {
 public:
  explicit EngineLoop(std::unique_ptr<Engine> engine);
  ~EngineLoop();  // Stop()s

  // Runs `fn` on the engine thread. Returns false (and drops `fn`) once the
  // loop is stopping.
  bool Post(std::function<void(Engine&)> fn);
  EngineLoad load() const;
  // Waits until no sequence is in flight and every KV block is free (held
  // prefill blocks included; cached unreferenced blocks count as free), or
  // `deadline`; returns whether it got idle. Judged on a load published
  // after the call, so work posted before it counts.
  bool WaitIdle(absl::Time deadline);
  // Finishes queued closures, then stops the thread. Idempotent.
  void Stop();
  // `fn` runs once, on the engine thread, the first time a step fails and
  // the runner reports itself unusable (a lost device): the worker turns
  // NOT_SERVING and stops admitting instead of failing every request.
  void OnRunnerLost(std::function<void(const absl::Status&)> fn);

 private:
  void Run();
  void Publish();
  // Runs one step and folds its prefill rate into prefill_rate_.
  absl::Status TimedStep();
  // After a failed step: reports a runner that went bad, once.
  void CheckRunner();

  std::unique_ptr<Engine> engine_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void(Engine&)>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  EngineLoad load_ ABSL_GUARDED_BY(mu_);
  // Engine thread only: the prefix cache version the keys were taken at.
  uint64_t keys_version_ = ~uint64_t{0};
  std::shared_ptr<const std::vector<uint64_t>> keys_;
  std::function<void(const absl::Status&)> on_runner_lost_ ABSL_GUARDED_BY(mu_);
  bool runner_lost_ = false;  // engine thread only
  double prefill_rate_ = 0;   // engine thread only; published by Publish()
  std::thread thread_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_ENGINE_LOOP_H_
