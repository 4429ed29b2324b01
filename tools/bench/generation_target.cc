#include "tools/bench/generation_target.h"

#include <utility>

#include "tools/bench/bench_stream_call.h"

namespace pdserve {
namespace {

void OnGenerateResponse(const v1::GenerateResponse& response, double ms, RequestRecord* record) {
  if (response.has_chunk()) {
    const v1::Chunk& c = response.chunk();
    if (c.token_ids_size() > 0 || !c.text().empty()) {
      record->chunks.push_back({ms, c.token_ids_size()});
    }
  } else if (response.has_started() && response.started().prompt_tokens() > 0) {
    // In text-prompt mode the server's count is the one that matters.
    record->input_tokens = response.started().prompt_tokens();
  } else if (response.has_finished() && response.finished().has_timings()) {
    record->timings = ToPhases(response.finished().timings());
  }
}

}  // namespace

PhaseTimings ToPhases(const v1::Timings& t) {
  PhaseTimings p;
  p.router_queue_ms = t.router_queue_ms();
  p.decode_admission_ms = t.decode_admission_ms();
  p.prefill_queue_ms = t.prefill_queue_ms();
  p.prefill_compute_ms = t.prefill_compute_ms();
  p.kv_transfer_ms = t.kv_transfer_ms();
  p.kv_transfer_bytes = static_cast<double>(t.kv_transfer_bytes());
  p.first_decode_step_ms = t.first_decode_step_ms();
  p.server_ttft_ms = t.ttft_ms();
  p.server_e2e_ms = t.e2e_ms();
  p.remote_prefill = t.prefill_mode() == "remote";
  return p;
}

v1::GenerateRequest BenchRequest(const BenchRequestSpec& spec) {
  v1::GenerateRequest req;
  if (!spec.messages.empty()) {
    for (const ChatMessage& m : spec.messages) {
      v1::ChatMessage* out = req.mutable_chat()->add_messages();
      out->set_role(m.role);
      out->set_content(m.content);
    }
  } else if (spec.text.empty()) {
    req.mutable_tokens()->mutable_ids()->Add(spec.prompt.begin(), spec.prompt.end());
  } else {
    req.set_text(spec.text);
  }
  req.set_max_tokens(spec.max_tokens);
  req.set_ignore_eos(spec.ignore_eos);
  req.set_return_token_ids(true);
  *req.mutable_sampling() = spec.sampling;
  return req;
}

void GenerationTarget::Start(const BenchRequestSpec& spec, RequestRecord record,
                             BenchClock::time_point bench_start, BenchDoneFn done) {
  using Call = BenchStreamCall<v1::GenerateRequest, v1::GenerateResponse>;
  auto* call = new Call(BenchRequest(spec), std::move(record), std::move(done), OnGenerateResponse);
  call->Start(
      [stub = stub_](grpc::ClientContext* ctx, const v1::GenerateRequest* req,
                     grpc::ClientReadReactor<v1::GenerateResponse>* reactor) {
        stub->async()->Generate(ctx, req, reactor);
      },
      bearer_token_, spec.timeout, bench_start);
}

}  // namespace pdserve
