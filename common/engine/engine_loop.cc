#include "common/engine/engine_loop.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "glog/logging.h"

namespace pdserve {

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {
  Publish();
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() { Stop(); }

void EngineLoop::OnRunnerLost(std::function<void(const absl::Status&)> fn) {
  absl::MutexLock lock(&mu_);
  on_runner_lost_ = std::move(fn);
}

void EngineLoop::CheckRunner() {
  const absl::Status health = engine_->runner_health();
  if (health.ok() || runner_lost_) return;
  runner_lost_ = true;
  LOG(ERROR) << "model runner lost: " << health;
  std::function<void(const absl::Status&)> fn;
  {
    absl::MutexLock lock(&mu_);
    fn = on_runner_lost_;
  }
  if (fn) fn(health);
}

bool EngineLoop::Post(std::function<void(Engine&)> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(fn));
  return true;
}

EngineLoad EngineLoop::load() const {
  absl::MutexLock lock(&mu_);
  return load_;
}

bool EngineLoop::WaitIdle(absl::Time deadline) {
  // A probe behind every closure posted so far notes the publish count
  // when it runs; the publish after it has run every earlier closure, an
  // admission an instant before this call (one that raced a drain)
  // included. The shared count is written and read under mu_ and outlives
  // a call that times out first.
  auto probe_steps = std::make_shared<int64_t>(-1);
  const bool posted = Post([this, probe_steps](Engine&) {
    absl::MutexLock lock(&mu_);
    *probe_steps = load_.steps;
  });
  absl::MutexLock lock(&mu_);
  auto idle = [this, posted, &probe_steps]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // A stopping loop runs no more probes: its last publish is the answer.
    if (posted && !stopping_ && (*probe_steps < 0 || load_.steps <= *probe_steps)) return false;
    return load_.running + load_.waiting == 0 && load_.kv_blocks_free == load_.kv_blocks_total;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

void EngineLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::Publish() {
  const PrefixCache& prefix = engine_->cache().allocator().prefix_cache();
  if (keys_ == nullptr || prefix.version() != keys_version_) {
    std::vector<uint64_t> keys = prefix.RecentKeys(kMaxPublishedBlockKeys);
    // Sorted so that the router can binary-search them.
    std::sort(keys.begin(), keys.end());
    keys_ = std::make_shared<const std::vector<uint64_t>>(std::move(keys));
    keys_version_ = prefix.version();
  }
  EngineLoad l;
  l.cached_block_keys = keys_;
  l.kv_blocks_total = engine_->cache().num_blocks();
  l.kv_blocks_free = engine_->cache().allocator().num_free();
  l.kv_blocks_cached = engine_->cache().allocator().num_cached_free();
  l.prefix_lookup_tokens = engine_->prefix_stats().lookup_tokens;
  l.prefix_hit_tokens = engine_->prefix_stats().hit_tokens;
  l.speculation = engine_->speculation_stats();
  l.grammar = engine_->grammar_stats();
  l.running = engine_->num_running();  // one batch plan for both counts
  l.waiting = engine_->num_sequences() - l.running;
  l.paused = engine_->num_paused();
  l.queued_prompt_tokens = engine_->queued_prompt_tokens();
  l.prefill_tokens_per_s = prefill_rate_;
  absl::MutexLock lock(&mu_);
  l.steps = load_.steps + 1;
  load_ = l;
}

absl::Status EngineLoop::TimedStep() {
  // Nothing is admitted during a step, so the drop in queued prompt tokens
  // is what the step prefilled.
  const int64_t queued = engine_->queued_prompt_tokens();
  const absl::Time start = absl::Now();
  absl::Status s = engine_->Step();
  const int64_t prefilled = queued - engine_->queued_prompt_tokens();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (s.ok() && prefilled >= kMinRateSampleTokens && seconds > 0) {
    const double sample = static_cast<double>(prefilled) / seconds;
    prefill_rate_ = prefill_rate_ == 0 ? sample : 0.7 * prefill_rate_ + 0.3 * sample;
  }
  return s;
}

// Closures first (admissions, cancellations, KV commits), then one step;
// when there is nothing to step, sleep until a closure arrives.
void EngineLoop::Run() {
  while (true) {
    std::deque<std::function<void(Engine&)>> batch;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
      if (!engine_->HasWork()) mu_.Await(absl::Condition(&ready));
      batch.swap(queue_);
      if (stopping_ && batch.empty()) break;
    }
    for (auto& fn : batch) fn(*engine_);
    if (engine_->HasWork()) {
      absl::Status s = TimedStep();
      if (!s.ok()) {
        LOG(ERROR) << "engine step failed: " << s;
        CheckRunner();
      }
    }
    Publish();
  }
  engine_.reset();
}

}  // namespace pdserve
