// TokenRelay: turns the decode worker's Tokens events into the client's
// Chunk messages for one request. It
//   - drops tokens it has already seen (events carry their index, so a
//     resent or overlapping event is harmless) and reports a gap as a
//     protocol error,
//   - never forwards more than max_tokens tokens,
//   - keeps the end-of-generation token (EOS/EOT) out of the output unless
//     ignore_eos makes it an ordinary token; it still counts as generated,
//   - detokenizes incrementally (only complete UTF-8 leaves the router),
//   - applies stop strings (StopMatcher): text that may begin a stop string
//     is held back, and on a match the text before it is the last output,
//   - with logprobs, puts each relayed token's log-probabilities on the
//     chunk next to its id, so they follow the ids through every rule above
//     (a dropped duplicate, the end-of-generation token and tokens past
//     max_tokens or a stop lose theirs too).
//
// One per request; not thread-safe (owned by GenerateFsm, which
// GenerateCall serialises).
#ifndef PDSERVE_ROUTER_CALL_TOKEN_RELAY_H_
#define PDSERVE_ROUTER_CALL_TOKEN_RELAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/text/detokenizer.h"
#include "common/text/tokenizer.h"
#include "pdserve/v1/generation.pb.h"
#include "pdserve/v1/worker.pb.h"
#include "router/call/stop_matcher.h"

namespace pdserve::router {

class TokenRelay {
 public:
  struct Options {
    int32_t max_tokens = 128;
    std::vector<std::string> stop;
    bool return_token_ids = false;
    bool ignore_eos = false;
    // The request set sampling.logprobs: chunks carry token_ids (whatever
    // return_token_ids says) and the worker's logprobs, one per id.
    bool logprobs = false;
  };
  TokenRelay(const Tokenizer& tokenizer, Options options);

  struct Output {
    v1::Chunk chunk;
    bool has_chunk = false;  // chunk carries text or token ids
    bool stopped = false;    // a stop string matched: the stream is over
  };

  // INTERNAL when the event skips indices (tokens were lost upstream).
  absl::StatusOr<Output> Push(const v1::Tokens& tokens);
  // End of the stream: the text still held back. A stop string can still
  // match here (it may end in the held-back bytes).
  Output Flush();

  // Tokens consumed so far (up to and including a stop match).
  int32_t completion_tokens() const { return next_index_; }
  // Their ids, end-of-generation token included: what a decode failover
  // appends to the prompt so the next worker continues from there.
  const std::vector<int32_t>& generated_ids() const { return ids_; }
  // No further token can be relayed: max_tokens reached, or the last token
  // ended the generation (end-of-generation without ignore_eos).
  bool ended() const;
  bool stopped() const { return stop_.stopped(); }

 private:
  const Tokenizer& tokenizer_;
  IncrementalDetokenizer detokenizer_;
  StopMatcher stop_;
  const int32_t max_tokens_;
  const bool return_token_ids_;
  const bool ignore_eos_;
  const bool logprobs_;
  int32_t next_index_ = 0;
  std::vector<int32_t> ids_;
};

}  // namespace pdserve::router

#endif  // PDSERVE_ROUTER_CALL_TOKEN_RELAY_H_
