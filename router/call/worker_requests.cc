#include "router/call/worker_requests.h"

namespace pdserve::router {

v1::KvTarget MakeKvTarget(const v1::Reserved& reserved, const std::string& default_kv_endpoint) {
  v1::KvTarget target;
  target.set_kv_endpoint(reserved.kv_endpoint().empty() ? default_kv_endpoint
                                                        : reserved.kv_endpoint());
  target.set_transfer_id(reserved.transfer_id());
  target.set_epoch(reserved.epoch());
  *target.mutable_kv_layout() = reserved.kv_layout();
  target.set_skip_prefix_tokens(reserved.cached_prefix_tokens());
  *target.mutable_kv_transports() = reserved.kv_transports();
  target.set_kv_host_id(reserved.kv_host_id());
  return target;
}

v1::DecodeRequest MakeDecodeRequest(const std::string& request_id, const ValidatedRequest& request,
                                    bool local_prefill, uint32_t kv_wait_ms,
                                    const std::vector<int32_t>& generated,
                                    bool accepts_migration, bool migrated) {
  v1::DecodeRequest r;
  r.set_request_id(request_id);
  r.mutable_prompt_tokens()->Assign(request.prompt_tokens.begin(), request.prompt_tokens.end());
  r.mutable_prompt_tokens()->Add(generated.begin(), generated.end());
  *r.mutable_sampling() = request.sampling;
  r.set_max_tokens(request.max_tokens - static_cast<int32_t>(generated.size()));
  r.set_first_index(static_cast<int32_t>(generated.size()));
  r.set_ignore_eos(request.ignore_eos);
  r.set_local_prefill(local_prefill);
  r.set_kv_wait_ms(kv_wait_ms);
  r.set_accepts_migration(accepts_migration);
  r.set_migrated(migrated);
  return r;
}

v1::HandoffRequest MakeHandoffRequest(const std::string& request_id, uint64_t offer_id,
                                      const v1::Reserved& reserved,
                                      const std::string& default_kv_endpoint) {
  v1::HandoffRequest r;
  r.set_request_id(request_id);
  r.set_offer_id(offer_id);
  *r.mutable_target() = MakeKvTarget(reserved, default_kv_endpoint);
  return r;
}

v1::PrefillRequest MakePrefillRequest(const std::string& request_id,
                                      const ValidatedRequest& request, const v1::Reserved& reserved,
                                      const std::string& default_kv_endpoint) {
  v1::PrefillRequest r;
  r.set_request_id(request_id);
  r.mutable_prompt_tokens()->Assign(request.prompt_tokens.begin(), request.prompt_tokens.end());
  *r.mutable_sampling() = request.sampling;
  *r.mutable_target() = MakeKvTarget(reserved, default_kv_endpoint);
  return r;
}

}  // namespace pdserve::router
