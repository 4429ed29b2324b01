#include "router/call/request_timeline.h"

namespace pdserve::router {
namespace {

double Ms(absl::Time from, absl::Time to) {
  if (from == absl::InfinitePast() || to == absl::InfinitePast()) return 0.0;
  return absl::ToDoubleMilliseconds(to - from);
}

}  // namespace

void RequestTimeline::MarkTokens(absl::Time t, int n) {
  if (n <= 0) return;
  MarkFirstToken(t);
  if (last_tokens_ != absl::InfinitePast()) {
    inter_token_seconds_.push_back(absl::ToDoubleSeconds(t - last_tokens_) / n);
  }
  last_tokens_ = t;
}

v1::Timings RequestTimeline::Merge(const v1::Timings& decode, const v1::PrefillResponse* prefill,
                                   bool local_prefill, absl::Time now) const {
  v1::Timings t = decode;
  t.set_router_queue_ms(Ms(admitted_, decode_asked_));
  // The decode worker measures admission precisely; our view (including a
  // network round trip) is the fallback for workers that leave it unset.
  if (t.decode_admission_ms() == 0.0) t.set_decode_admission_ms(Ms(decode_asked_, reserved_));
  if (prefill != nullptr) {
    t.set_prefill_queue_ms(prefill->queue_ms());
    t.set_prefill_compute_ms(prefill->compute_ms());
    t.set_kv_transfer_ms(prefill->kv_transfer_ms());
    t.set_kv_transfer_bytes(prefill->kv_transfer_bytes());
    t.set_prefill_cached_tokens(prefill->cached_prompt_tokens());
  }
  t.set_ttft_ms(Ms(admitted_, first_token_));
  t.set_e2e_ms(Ms(admitted_, now));
  t.set_prefill_mode(local_prefill ? "local" : "remote");
  return t;
}

}  // namespace pdserve::router
