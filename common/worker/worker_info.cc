#include "common/worker/worker_info.h"

#include "common/rpc/protocol_version.h"
#include "common/worker/worker_proto.h"

namespace pdserve {

v1::WorkerInfo DescribeWorker(v1::WorkerRole role, const std::string& worker_id, const Model& model,
                              const KvLayout& layout) {
  v1::WorkerInfo info;
  info.set_worker_id(worker_id);
  info.set_role(role);
  info.set_model_fingerprint(model.fingerprint());
  *info.mutable_kv_layout() = ToProto(layout);
  info.set_protocol_version(kProtocolVersion);
  info.set_context_length(model.config().context_length);
  info.set_model_name(model.config().name);
  return info;
}

}  // namespace pdserve
