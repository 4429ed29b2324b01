// PrefillContext: what every Prefill call of a prefill worker shares.
// Owned by PrefillWorker; outlives every call.
#ifndef PDSERVE_PREFILL_WORKER_PREFILL_CONTEXT_H_
#define PDSERVE_PREFILL_WORKER_PREFILL_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "common/engine/engine_loop.h"
#include "common/engine/kv_cache.h"
#include "common/grammar/grammar_compiler.h"
#include "common/kv/framed_kv_sender.h"
#include "common/kv/kv_path.h"
#include "common/kv/kv_transport.h"
#include "common/model/model.h"
#include "pdserve/v1/worker.pb.h"
#include "prefill_worker/kv_exporter.h"
#include "prefill_worker/prefill_admission.h"

namespace pdserve::prefill {

struct PrefillContext {
  const Model* model = nullptr;
  GrammarCompiler* grammars = nullptr;  // structured output
  EngineLoop* loop = nullptr;
  KvExporter* exporter = nullptr;
  KvLayout layout;
  std::string worker_id;
  std::atomic<bool> draining{false};
  // --kv_transport, and what this worker brings to the choice of path.
  KvTransportFlag kv_transport = KvTransportFlag::kAuto;
  KvLocalSide kv_local;
  const FramedKvSender* sender = nullptr;  // for endpoints that refused cuda_ipc
  // Refuses prompts that could not start before their call's deadline.
  PrefillAdmission admission;
  // LoadReport.prefill_progress: bumped by the engine thread after every
  // layer of a prefill step, read by load reports while the step runs.
  std::atomic<uint64_t> prefill_progress{0};
};

// This worker's load report: the engine's published load and progress.
v1::LoadReport PrefillLoadReport(const PrefillContext& ctx);

}  // namespace pdserve::prefill

#endif  // PDSERVE_PREFILL_WORKER_PREFILL_CONTEXT_H_
