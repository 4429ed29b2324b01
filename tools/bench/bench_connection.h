// BenchConnection: the server a `pdserve bench` run measures — the target
// that sends its requests plus what the run needs to know about the model
// behind it (vocabulary for prompts, context for a length check).
#ifndef PDSERVE_TOOLS_BENCH_BENCH_CONNECTION_H_
#define PDSERVE_TOOLS_BENCH_BENCH_CONNECTION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "pdserve/v1/generation.grpc.pb.h"
#include "pdserve/v1/worker.grpc.pb.h"
#include "tools/bench/bench_target.h"
#include "tools/bench/client_security.h"
#include "tools/bench/prompt_text.h"

namespace pdserve {

enum class BenchTargetKind { kRouter, kDecode, kOpenAi };

// "router", "decode" or "openai".
absl::StatusOr<BenchTargetKind> ParseBenchTargetKind(absl::string_view name);

struct BenchConnection {
  std::unique_ptr<v1::Generation::Stub> router;     // kRouter
  std::unique_ptr<v1::DecodeWorker::Stub> decode;   // kDecode
  std::unique_ptr<BenchTarget> target;              // uses the stub above
  std::string model_name;
  int vocab_size = 0;
  int context_length = 0;  // 0 = unknown
};

// Connects and asks the server about its model. `tokenizer` (may be null
// for kRouter) supplies the vocabulary where the server does not report
// one, and the end-of-generation ids an OpenAI server without
// `ignore_eos` must ban (`openai_ban_eos`). `security` applies to the
// router target.
absl::StatusOr<BenchConnection> ConnectBench(BenchTargetKind kind, const std::string& address,
                                             const PromptText* tokenizer,
                                             const ClientSecurity& security = {},
                                             bool openai_ban_eos = false);

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_BENCH_CONNECTION_H_
