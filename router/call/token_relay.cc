#include "router/call/token_relay.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pdserve::router {

TokenRelay::TokenRelay(const Tokenizer& tokenizer, Options options)
    : tokenizer_(tokenizer),
      detokenizer_(tokenizer),
      stop_(std::move(options.stop)),
      max_tokens_(options.max_tokens),
      // A client maps logprobs to tokens by the ids.
      return_token_ids_(options.return_token_ids || options.logprobs),
      ignore_eos_(options.ignore_eos),
      logprobs_(options.logprobs) {}

absl::StatusOr<TokenRelay::Output> TokenRelay::Push(const v1::Tokens& tokens) {
  Output out;
  if (tokens.first_index() > next_index_) {
    return absl::InternalError(absl::StrCat("token event starts at index ", tokens.first_index(),
                                            " but ", next_index_,
                                            " tokens were received (tokens lost)"));
  }
  // Only an event with one logprobs entry per id can be relayed with them
  // (a worker that predates them sends none): each chunk then has logprobs
  // for all of its ids or for none.
  const bool with_logprobs = logprobs_ && tokens.logprobs_size() == tokens.ids_size();
  std::string text;
  for (int i = 0; i < tokens.ids_size(); ++i) {
    const int64_t index = static_cast<int64_t>(tokens.first_index()) + i;
    if (index < next_index_) continue;  // a duplicate
    if (next_index_ >= max_tokens_ || stop_.stopped()) break;
    const int32_t id = tokens.ids(i);
    ++next_index_;
    ids_.push_back(id);
    if (!ignore_eos_ && tokenizer_.IsEog(id)) continue;  // the end marker, not output
    if (return_token_ids_) out.chunk.add_token_ids(id);
    if (with_logprobs) *out.chunk.add_logprobs() = tokens.logprobs(i);
    StopMatcher::Result r = stop_.Push(detokenizer_.Push(id));
    text += r.text;
    if (r.stopped) {
      out.stopped = true;
      break;
    }
  }
  out.has_chunk = !text.empty() || out.chunk.token_ids_size() > 0;
  out.chunk.set_text(std::move(text));
  return out;
}

bool TokenRelay::ended() const {
  if (next_index_ >= max_tokens_ || stop_.stopped()) return true;
  return !ids_.empty() && !ignore_eos_ && tokenizer_.IsEog(ids_.back());
}

TokenRelay::Output TokenRelay::Flush() {
  Output out;
  if (stop_.stopped()) return out;
  StopMatcher::Result r = stop_.Push(detokenizer_.Flush());
  std::string text = std::move(r.text);
  if (r.stopped) {
    out.stopped = true;
  } else {
    text += stop_.Flush();
  }
  out.has_chunk = !text.empty();
  out.chunk.set_text(std::move(text));
  return out;
}

}  // namespace pdserve::router
