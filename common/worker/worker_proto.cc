#include "common/worker/worker_proto.h"

namespace pdserve {

v1::KvLayout ToProto(const KvLayout& l) {
  v1::KvLayout p;
  p.set_num_layers(l.n_layers);
  p.set_num_kv_heads(l.n_kv_heads);
  p.set_head_dim(l.head_dim);
  p.set_block_size(l.block_size);
  p.set_dtype(l.dtype);
  for (int32_t w : l.layer_window) p.add_layer_window(static_cast<uint32_t>(w));
  return p;
}

KvLayout FromProto(const v1::KvLayout& p) {
  KvLayout l;
  l.n_layers = static_cast<int32_t>(p.num_layers());
  l.n_kv_heads = static_cast<int32_t>(p.num_kv_heads());
  l.head_dim = static_cast<int32_t>(p.head_dim());
  l.block_size = static_cast<int32_t>(p.block_size());
  l.dtype = p.dtype();
  for (uint32_t w : p.layer_window()) l.layer_window.push_back(static_cast<int32_t>(w));
  return l;
}

v1::LoadReport ToLoadReport(const EngineLoad& load, bool draining) {
  v1::LoadReport r;
  r.set_kv_blocks_total(load.kv_blocks_total);
  r.set_kv_blocks_free(load.kv_blocks_free);
  r.set_kv_blocks_used(load.kv_blocks_total - load.kv_blocks_free);
  r.set_kv_blocks_cached(load.kv_blocks_cached);
  if (load.cached_block_keys != nullptr) {
    r.mutable_cached_block_keys()->Add(load.cached_block_keys->begin(),
                                       load.cached_block_keys->end());
  }
  r.set_running(load.running);
  r.set_waiting(load.waiting);
  r.set_queued_prompt_tokens(load.queued_prompt_tokens);
  r.set_prefill_tokens_per_second(static_cast<float>(load.prefill_tokens_per_s));
  r.set_draining(draining);
  return r;
}

}  // namespace pdserve
