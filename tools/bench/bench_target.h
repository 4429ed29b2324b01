// BenchTarget: the server side of one `pdserve bench` request. RunLoad paces
// requests and collects records; a target knows how to send one request to
// one kind of server and how to time what comes back, so the same load and
// the same metric definitions apply to every server compared:
//   router   pdserve's public Generation API (GenerationTarget)
//   decode   a decode worker's Decode RPC with local prefill, no router
//            (DecodeTarget) — the baseline of the router-overhead measurement
//   openai   an OpenAI-compatible HTTP server streaming server-sent events,
//            e.g. llama.cpp's (OpenAiTarget)
//
// Thread-safety: Start may be called from the pacing thread while earlier
// requests complete on other threads.
#ifndef PDSERVE_TOOLS_BENCH_BENCH_TARGET_H_
#define PDSERVE_TOOLS_BENCH_BENCH_TARGET_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/text/chat_template.h"
#include "pdserve/v1/common.pb.h"
#include "tools/bench/bench_stats.h"

namespace pdserve {

using BenchClock = std::chrono::steady_clock;

inline double MsBetween(BenchClock::time_point from, BenchClock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// One request as every target sees it: chat `messages` (a conversation
// workload), else `text` in text-prompt mode (servers that take no token
// ids), else the ids in `prompt`, which text-prompt mode also sets.
struct BenchRequestSpec {
  std::vector<int32_t> prompt;
  std::string text;
  std::vector<ChatMessage> messages;
  int max_tokens = 0;
  bool ignore_eos = false;
  v1::SamplingParams sampling;
  absl::Duration timeout = absl::Minutes(5);
};

// Called exactly once per started request, from any thread, with the
// record's timing fields, chunks, code and error filled in.
using BenchDoneFn = std::function<void(RequestRecord record, BenchClock::time_point end)>;

class BenchTarget {
 public:
  virtual ~BenchTarget() = default;

  // `record` arrives with index and lengths set; send_s is measured from
  // `bench_start` to when the request is actually sent.
  virtual void Start(const BenchRequestSpec& spec, RequestRecord record,
                     BenchClock::time_point bench_start, BenchDoneFn done) = 0;

  // Blocks until every started request's `done` has returned and no thread
  // of the target still touches it. RunLoad calls it before returning.
  virtual void Quiesce() {}
};

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_BENCH_TARGET_H_
