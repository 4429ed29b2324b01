// The chaos run shared by chaos_test (SmolLM2, chat) and chaos_window_test
// (Gemma 3, prompts past its 512-token sliding window): 1 router, 2 prefill
// and 2 decode workers (real binaries, speculation on as by default) under
// a bounded concurrent load, while workers fail at random (seeded) moments
// in random (seeded) ways:
//   kill   SIGKILL a worker, restart it a moment later;
//   term   SIGTERM a worker (a decode worker drains by migrating its
//          streams with their KV, rebalancing on), restart it once gone;
//   stop   SIGSTOP a prefill worker (a stall), SIGCONT it a moment later;
//   cut    cut every KV connection into one decode worker at once (its KV
//          endpoint is a relay in this process), mid-transfer when one runs.
// The load mixes greedy, seeded sampled and regex-constrained requests over
// gRPC with OpenAI HTTP requests (chat or completions, as the model
// allows), streamed and not; some streamed clients hang up after the first
// event and some read slowly. Every prompt shares a prefix with the others
// (a system prompt; a long preamble for Gemma), so the prefix cache and
// delta transfers are in play. Every stream that completes must carry
// exactly the tokens (text, over HTTP) the in-process engine gives the same
// request without faults; every other one must end with a clear error well
// within its deadline; none may hang; afterwards every worker's KV pool is
// back at idle. Each process's RSS, descriptors and threads are sampled,
// and the gRPC streams' TTFT and inter-token latency are tallied.
//
// Prints one "chaos summary:" line with the numbers docs/RELIABILITY.md
// reports. Knobs (environment): PDSERVE_CHAOS_SEED, PDSERVE_CHAOS_REQUESTS,
// PDSERVE_CHAOS_FAULTS ("kill,term,stop,cut" by default; "none" for the
// fault-free baseline of the same load), PDSERVE_CHAOS_KV_DTYPE (f16,
// int8), PDSERVE_CHAOS_KV_TLS (1: encrypted KV plane),
// PDSERVE_CHAOS_ROUTER_FLAGS (comma-separated router flags).
#ifndef PDSERVE_TESTS_INTEGRATION_CHAOS_HARNESS_H_
#define PDSERVE_TESTS_INTEGRATION_CHAOS_HARNESS_H_

#include <string>
#include <vector>

namespace pdserve::chaos {

struct Workload {
  std::string name;        // in the summary: model=<name>
  std::string model_path;  // empty: skip (the model is not here)
  bool chat = true;        // chat requests; false: plain text / completions
  std::vector<std::string> prompts;
  int max_tokens = 24;
  int requests = 100;  // PDSERVE_CHAOS_REQUESTS overrides
  int kv_blocks = 256;
  // Every prompt must be at least this long (past a sliding window).
  int min_prompt_tokens = 0;
  // The KV plane over mutual TLS (--kv_tls; the workers' gRPC ports then
  // serve TLS too, with the same certificate). PDSERVE_CHAOS_KV_TLS=1
  // turns it on for any workload.
  bool kv_tls = false;
};

// Runs the chaos load on `w` and records every broken invariant as a test
// failure.
void Run(const Workload& w);

}  // namespace pdserve::chaos

#endif  // PDSERVE_TESTS_INTEGRATION_CHAOS_HARNESS_H_
