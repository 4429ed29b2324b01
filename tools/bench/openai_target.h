// OpenAiTarget: `pdserve bench` against an OpenAI-compatible completions
// endpoint that streams server-sent events — llama.cpp's server, as shipped
// by `llama-cpp-python[server]`, is the peer compared in
// docs/PERFORMANCE.md. Prompts go as text to /v1/completions
// (LoadOptions::prompt_text must be set), conversations as messages to
// /v1/chat/completions; each event with text is timed as one token, and a
// stream is credited with the server's usage count of output tokens or,
// without one, with exactly max_tokens when it ends with finish_reason
// "length" (a server may send several tokens in one event, e.g. an
// incomplete UTF-8 character held back, or a speculative step's tokens).
//
// HTTP on Boost.Beast, one connection and thread per request in flight:
// simple, and the loads compared here keep at most a few hundred requests
// in flight. Each request's deadline bounds every network operation.
#ifndef PDSERVE_TOOLS_BENCH_OPENAI_TARGET_H_
#define PDSERVE_TOOLS_BENCH_OPENAI_TARGET_H_

#include <boost/asio/ip/tcp.hpp>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tools/bench/bench_target.h"

namespace pdserve {

// The JSON body for `spec`. Ignoring EOS sends `ignore_eos` (vLLM's,
// llama-server's and pdserve's extension); `ban_ids`, if any, also get a
// -100 logit bias, for servers without it.
std::string OpenAiCompletionBody(const BenchRequestSpec& spec, const std::vector<int32_t>& ban_ids);

class OpenAiTarget final : public BenchTarget {
 public:
  // `address` is host:port; resolved once here.
  static absl::StatusOr<std::unique_ptr<OpenAiTarget>> Create(const std::string& address,
                                                              std::vector<int32_t> ban_ids);
  ~OpenAiTarget() override { Quiesce(); }

  void Start(const BenchRequestSpec& spec, RequestRecord record,
             BenchClock::time_point bench_start, BenchDoneFn done) override;
  void Quiesce() override;

 private:
  OpenAiTarget(std::string address, boost::asio::ip::tcp::endpoint endpoint,
               std::vector<int32_t> ban_ids)
      : address_(std::move(address)), endpoint_(endpoint), ban_ids_(std::move(ban_ids)) {}

  void Run(BenchRequestSpec spec, RequestRecord record, BenchClock::time_point bench_start,
           BenchDoneFn done) const;

  const std::string address_;
  const boost::asio::ip::tcp::endpoint endpoint_;
  const std::vector<int32_t> ban_ids_;
  absl::Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_OPENAI_TARGET_H_
