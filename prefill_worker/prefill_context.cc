#include "prefill_worker/prefill_context.h"

#include "common/worker/worker_proto.h"

namespace pdserve::prefill {

v1::LoadReport PrefillLoadReport(const PrefillContext& ctx) {
  v1::LoadReport r = ToLoadReport(ctx.loop->load(), ctx.draining.load());
  r.set_prefill_progress(ctx.prefill_progress.load(std::memory_order_relaxed));
  return r;
}

}  // namespace pdserve::prefill
